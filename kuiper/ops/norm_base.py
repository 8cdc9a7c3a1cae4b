"""What the normalisation ops share: where optional tensors come from, shape checks and the
centred statistics.

Weight, bias and running statistics reach a norm op in one of three ways: as a
constant ``@attribute`` (nn.* modules), as an input bound to ``$key`` (the F.* forms
pnnx keeps) or not at all (``key=None``).  Statistics over the data use the biased
variance, like PyTorch.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from .base import Op
from .special_values import FLOAT32_MAX, is_tame


def describe_value(value) -> str:
    """A value's shape for an error message, or its type when it has none."""
    shape = getattr(value, "shape", None)
    return str(tuple(shape)) if shape is not None else f"a {type(value).__name__}"


class NormOp(Op):
    """Helpers shared by the family: where optional tensors come from, and shape checks."""

    def optional_tensor(self, key: str):
        """How ``key`` (weight, bias, running_mean ...) is given.

        Returns ("attr", numpy array), ("input", position) or ("none", None).
        A param ``key=None`` (what pnnx writes for an absent F.* argument) means none.
        """
        if key in self.node.attrs:
            return "attr", self.node.attrs[key]
        position = self.input_index(key)
        if position is not None:
            return "input", position
        if self.param(key, None) is not None:
            raise self.unsupported(key, self.param(key), f"None, an '@{key}' attribute or an input bound to '${key}'")
        return "none", None

    def input_position(self) -> int:
        """The data input: bound to ``$input``, else the first."""
        return self.input_index("input", 0)

    def check_known_inputs(self, keys):
        """Every input must be bound to one of ``keys`` (or be the only, unkeyed, data input)."""
        for position, key in enumerate(self.node.input_keys):
            if key is None and position == 0:
                continue
            if key not in keys:
                raise self.error(f"input {position} is bound to ${key}, expected one of {sorted(keys)}")

    def per_channel(self, value, channels: int, name: str):
        """A (C,) array from an input, with a clear error otherwise."""
        if not self.backend.is_array(value) or value.ndim != 1 or value.shape[0] != channels:
            raise ShapeError(f"{self.node.describe()}: {name} must have shape ({channels},), found {describe_value(value)}")
        return value


def channel_shape(channels: int, ndim: int, channel_axis: int = 1) -> tuple[int, ...]:
    """Shape that broadcasts a (C,) array along ``channel_axis`` of a rank-``ndim`` tensor."""
    return (channels,) + (1,) * (ndim - channel_axis - 1)


def normalize_over(xp, x, axes, eps: float):
    """(x - mean) / sqrt(var + eps) over ``axes`` with the biased variance.

    kuiper's rule (docs/reliability.md): float32 statistics are float64 wherever float32 squares could
    overflow, so values up to float32's largest normalize to finite numbers, as the compiled kernels
    (float64 sums always) give them; one dot product finds such inputs."""
    if x.dtype == xp.float32 and not is_tame(xp, x, FLOAT32_MAX / 8):
        return xp.astype(_normalize(xp, xp.astype(x, xp.float64), axes, eps), xp.float32)
    return _normalize(xp, x, axes, eps)


def _normalize(xp, x, axes, eps: float):
    mean = xp.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = xp.mean(centered * centered, axis=axes, keepdims=True)
    return centered / xp.sqrt(var + eps)


def centered_with_fast_variance(xp, x, axes, eps: float):
    """(x - mean, rsqrt(var + eps)) over ``axes`` with var = max(mean(x * x) - mean * mean, 0), each step
    in x's dtype (Flax's ``use_fast_variance``; a NaN variance stays NaN).  The two sums are taken in
    float64 and then rounded, as the compiled loop takes them (more exact than any order of float32
    additions, so both paths give a large-mean row the same variance); no float64 statistics beyond
    that: the formula's own float32 rounding (and overflow) is what the program asked for."""
    count = xp.asarray(math.prod(x.shape[axis] for axis in axes), dtype=x.dtype)

    def mean_of(values):
        return xp.astype(xp.sum(values, axis=axes, keepdims=True, dtype=xp.float64), x.dtype) / count

    mean = mean_of(x)
    var = xp.maximum(mean_of(x * x) - mean * mean, xp.zeros_like(mean))
    return x - mean, xp.ones_like(mean) / xp.sqrt(var + xp.asarray(eps, dtype=x.dtype))


class AffineNormOp(NormOp):
    """Reads eps and the optional elementwise weight/bias (attrs, inputs or None)."""

    affine_key = "affine"

    def read_affine(self):
        self.eps = self.float_param("eps", default=1e-5)
        if self.eps < 0:
            raise self.error(f"param 'eps' must be non-negative, found {self.eps}")
        self.weight_source = self.optional_tensor("weight")
        self.bias_source = self.optional_tensor("bias")
        if self.bool_param("constant_affine", default=False):
            if self.weight_source[0] != "attr":
                raise self.error(f"{self.affine_key}=True needs the weight '@weight'")
        self.static_weight = self._static(self.weight_source)
        self.static_bias = self._static(self.bias_source)

    def _static(self, source):
        kind, value = source
        return self.backend.asarray(value) if kind == "attr" else None

    def affine_values(self, inputs):
        """(weight, bias) for this call; either may be None."""
        weight = self.static_weight if self.weight_source[0] != "input" else inputs[self.weight_source[1]]
        bias = self.static_bias if self.bias_source[0] != "input" else inputs[self.bias_source[1]]
        return weight, bias
