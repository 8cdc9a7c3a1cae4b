"""Normalisation over groups of channels or the trailing dims: nn.GroupNorm, nn.LayerNorm, nn.RMSNorm
and their F.* forms.

Group and layer norm centre and scale by statistics of each sample (biased variance,
like PyTorch); RMS norm only scales, by the root mean square.
"""

from __future__ import annotations

from ..errors import ShapeError
from .norm_base import AffineNormOp, centered_with_fast_variance, channel_shape, describe_value, normalize_over


class GroupNorm(AffineNormOp):
    """nn.GroupNorm / F.group_norm: statistics per sample over each group of channels (and all spatial dims)."""

    types = ("GroupNorm",)

    def setup(self):
        self.check_known_inputs({"input", "weight", "bias"})
        self.num_groups = self.int_param("num_groups")
        if self.num_groups < 1:
            raise self.error(f"param 'num_groups' must be positive, found {self.num_groups}")
        self.read_affine()
        channels = self.param("num_channels", None)
        if isinstance(channels, int) and channels % self.num_groups:
            raise self.error(f"num_groups={self.num_groups} does not divide num_channels={channels}")
        for value in (self.static_weight, self.static_bias):
            if value is not None and (value.ndim != 1 or (isinstance(channels, int) and value.shape[0] != channels)):
                raise self.error(f"weight and bias must have shape ({channels},), found {tuple(value.shape)}")

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.input_position()]
        if not self.backend.is_array(x) or x.ndim < 2 or x.shape[1] % self.num_groups:
            raise ShapeError(f"{self.node.describe()}: expected (N, C, ...) with C divisible by "
                             f"{self.num_groups}, found {describe_value(x)}")
        batch, channels = x.shape[0], x.shape[1]
        grouped = xp.reshape(x, (batch, self.num_groups, -1))
        out = xp.reshape(normalize_over(xp, grouped, (2,), self.eps), tuple(x.shape))
        weight, bias = self.affine_values(inputs)
        shape = channel_shape(channels, x.ndim)
        if weight is not None:
            out = out * xp.reshape(self.per_channel(weight, channels, "weight"), shape)
        if bias is not None:
            out = out + xp.reshape(self.per_channel(bias, channels, "bias"), shape)
        return out


class LayerNorm(AffineNormOp):
    """nn.LayerNorm / F.layer_norm: statistics over the last len(normalized_shape) dims.

    ``fast_variance=True`` (Flax's default ``use_fast_variance``, which kuiper/graph/row_normalizations.py
    finds written out) takes the variance as ``max(mean(x * x) - mean * mean, 0)`` and computes
    ``(x - mean) * (rsqrt(var + eps) * weight) + bias``, every step in x's dtype as that formula
    rounds: on rows with a large mean its float32 variance is not the two-pass one, and the program
    that wrote it gets what it wrote.
    """

    types = ("LayerNorm",)
    affine_key = "elementwise_affine"

    def setup(self):
        self.check_known_inputs({"input", "weight", "bias"})
        self.normalized_shape = self.ints_param("normalized_shape")
        if not self.normalized_shape or any(d < 1 for d in self.normalized_shape):
            raise self.error(f"param 'normalized_shape' must be positive sizes, found {self.normalized_shape}")
        self.read_affine()
        for value in (self.static_weight, self.static_bias):
            if value is not None and tuple(value.shape) != self.normalized_shape:
                raise self.error(f"weight and bias must have shape {self.normalized_shape}, "
                                 f"found {tuple(value.shape)}")
        self.axes = tuple(range(-len(self.normalized_shape), 0))
        self.fast_variance = self.bool_param("fast_variance", default=False)

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        k = len(self.normalized_shape)
        if not self.backend.is_array(x) or x.ndim < k or tuple(x.shape[-k:]) != self.normalized_shape:
            raise ShapeError(f"{self.node.describe()}: the last {k} dim(s) must be {self.normalized_shape}, "
                             f"found input {describe_value(x)}")
        weight, bias = self.affine_values(inputs)
        for name, value in (("weight", weight), ("bias", bias)):
            if value is not None and tuple(value.shape) != self.normalized_shape:
                raise ShapeError(f"{self.node.describe()}: {name} must have shape {self.normalized_shape}, "
                                 f"found {describe_value(value)}")
        if self.fast_variance:
            centered, factor = centered_with_fast_variance(self.xp, x, self.axes, self.eps)
            out = centered * (factor if weight is None else factor * weight)
        else:
            out = normalize_over(self.xp, x, self.axes, self.eps)
            if weight is not None:
                out = out * weight
        if bias is not None:
            out = out + bias
        return out


class RMSNorm(AffineNormOp):
    """nn.RMSNorm / F.rms_norm: x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dims.

    eps=None (pnnx writes it for the default) is the machine epsilon of the input's dtype, as in PyTorch.
    """

    types = ("RMSNorm",)

    def setup(self):
        self.check_known_inputs({"input", "weight"})
        self.normalized_shape = self.ints_param("normalized_shape")
        if not self.normalized_shape or any(d < 1 for d in self.normalized_shape):
            raise self.error(f"param 'normalized_shape' must be positive sizes, found {self.normalized_shape}")
        self.eps = None if self.param("eps", None) is None else self.float_param("eps")
        if self.eps is not None and self.eps < 0:
            raise self.error(f"param 'eps' must be non-negative, found {self.eps}")
        self.weight_source = self.optional_tensor("weight")
        if self.bool_param("constant_affine", default=False):
            if self.weight_source[0] != "attr":
                raise self.error("elementwise_affine=True needs the weight '@weight'")
        self.static_weight = self._static(self.weight_source)
        if self.static_weight is not None and tuple(self.static_weight.shape) != self.normalized_shape:
            raise self.error(f"weight must have shape {self.normalized_shape}, found {tuple(self.static_weight.shape)}")
        self.axes = tuple(range(-len(self.normalized_shape), 0))

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.input_position()]
        k = len(self.normalized_shape)
        if not self.backend.is_array(x) or x.ndim < k or tuple(x.shape[-k:]) != self.normalized_shape:
            raise ShapeError(f"{self.node.describe()}: the last {k} dim(s) must be {self.normalized_shape}, "
                             f"found input {describe_value(x)}")
        eps = float(xp.finfo(x.dtype).eps) if self.eps is None else self.eps
        out = x / xp.sqrt(xp.mean(x * x, axis=self.axes, keepdims=True) + eps)
        weight = self.static_weight if self.weight_source[0] != "input" else inputs[self.weight_source[1]]
        if weight is not None:
            if tuple(weight.shape) != self.normalized_shape:
                raise ShapeError(f"{self.node.describe()}: weight must have shape {self.normalized_shape}, "
                                 f"found {describe_value(weight)}")
            out = out * weight
        return out


OPS = [GroupNorm, LayerNorm, RMSNorm]
