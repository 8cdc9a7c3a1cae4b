"""Normalisation: batch, group, layer, RMS and instance norm, local response norm, and F.normalize.

Where the statistics are constants (BatchNorm, InstanceNorm with
track_running_stats), the op folds them with the affine weights into one
per-channel ``scale`` and ``shift`` at build time, so running it is one
multiply-add.  The F.* forms that pnnx keeps take running stats, weight and
bias as inputs (``$running_mean``, ``$weight`` ...) or write ``weight=None``
params; such inputs are folded on every call.

Statistics over the data (group, layer, instance norm) use the biased
variance, like PyTorch.
"""

from __future__ import annotations

import numpy as np  # only to fold constant statistics and weights once, at build time

from ..errors import ShapeError
from .base import Op, normalize_axis


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return str(tuple(shape)) if shape is not None else f"a {type(value).__name__}"


class _NormOp(Op):
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
            raise ShapeError(f"{self.node.describe()}: {name} must have shape ({channels},), found {_describe(value)}")
        return value


def _channel_shape(channels: int, ndim: int, channel_axis: int = 1) -> tuple[int, ...]:
    """Shape that broadcasts a (C,) array along ``channel_axis`` of a rank-``ndim`` tensor."""
    return (channels,) + (1,) * (ndim - channel_axis - 1)


# ---------------------------------------------------------------- batch norm


class BatchNorm(_NormOp):
    """nn.BatchNorm1d/2d/3d (inference: running statistics) and F.batch_norm.

    pnnx folds a BatchNorm that follows a conv or linear layer into it; the
    ones that remain (after an input, an activation ...) come here.  Channels
    are axis 1: (N, C) or (N, C, *spatial).
    """

    types = ("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d", "F.batch_norm")

    def setup(self):
        self.eps = self.float_param("eps", default=1e-5)
        if self.eps < 0:
            raise self.error(f"param 'eps' must be non-negative, found {self.eps}")
        self.check_known_inputs({"input", "running_mean", "running_var", "weight", "bias"})
        self.sources = {key: self.optional_tensor(key)
                        for key in ("running_mean", "running_var", "weight", "bias")}
        for key in ("running_mean", "running_var"):
            if self.sources[key][0] == "none":
                raise self.unsupported(key, None, "running statistics (training-mode batch statistics are not "
                                                  "an inference computation)")
        if self.node.type.startswith("nn.") and self.bool_param("affine", default=True):
            for key in ("weight", "bias"):
                if self.sources[key][0] != "attr":
                    raise self.error(f"affine=True needs the weight '@{key}'")
        self.channels = self.param("num_features", None)
        self.static = all(kind != "input" for kind, _ in self.sources.values())
        if self.static:
            scale, shift = self._fold_constants()
            self.channels = scale.shape[0]
            self.scale = self.backend.asarray(scale)
            self.shift = self.backend.asarray(shift)
            self._shaped = {}  # ndim -> (scale, shift) shaped to broadcast over that rank

    def _fold_constants(self):
        """scale = weight / sqrt(var + eps), shift = bias - mean * scale, in float64 then float32."""
        arrays = {key: value for key, (kind, value) in self.sources.items() if kind == "attr"}
        channels = arrays["running_mean"].shape[0] if arrays["running_mean"].ndim == 1 else None
        for key, array in arrays.items():
            if channels is None or array.ndim != 1 or array.shape[0] != channels:
                raise self.error(f"'@{key}' must be a vector with one value per channel, found shape "
                                 f"{tuple(array.shape)} (running_mean has {tuple(arrays['running_mean'].shape)})")
        if self.channels is not None and self.channels != channels:
            raise self.error(f"num_features={self.channels} but the statistics have {channels} channels")
        mean = np.asarray(arrays["running_mean"], dtype=np.float64)
        var = np.asarray(arrays["running_var"], dtype=np.float64)
        scale = 1.0 / np.sqrt(var + self.eps)
        if "weight" in arrays:
            scale = scale * np.asarray(arrays["weight"], dtype=np.float64)
        shift = -mean * scale
        if "bias" in arrays:
            shift = shift + np.asarray(arrays["bias"], dtype=np.float64)
        dtype = arrays["running_mean"].dtype if arrays["running_mean"].dtype.kind == "f" else np.float32
        return scale.astype(dtype), shift.astype(dtype)

    def _fold_inputs(self, inputs, channels: int):
        xp = self.xp

        def get(key):
            kind, value = self.sources[key]
            if kind == "input":
                return self.per_channel(inputs[value], channels, key)
            if kind == "attr":
                return self.backend.asarray(value)
            return None

        mean, var, weight, bias = (get(key) for key in ("running_mean", "running_var", "weight", "bias"))
        scale = 1.0 / xp.sqrt(var + self.eps)
        if weight is not None:
            scale = scale * weight
        shift = -mean * scale
        if bias is not None:
            shift = shift + bias
        return scale, shift

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        if not self.backend.is_array(x) or x.ndim < 2:
            raise ShapeError(f"{self.node.describe()}: expected (N, C) or (N, C, ...), found {_describe(x)}")
        channels = x.shape[1]
        xp = self.xp
        if self.static:
            if channels != self.channels:
                raise ShapeError(f"{self.node.describe()}: expected {self.channels} channels (dim 1), "
                                 f"found input {tuple(x.shape)}")
            shape = _channel_shape(channels, x.ndim)
            scale, shift = self.cached(
                self._shaped, x.ndim, lambda: (xp.reshape(self.scale, shape), xp.reshape(self.shift, shape))
            )
        else:
            scale, shift = self._fold_inputs(inputs, channels)
            shape = _channel_shape(channels, x.ndim)
            scale, shift = xp.reshape(scale, shape), xp.reshape(shift, shape)
        return x * scale + shift


# ---------------------------------------------------------------- statistics over the data


def _normalize_over(xp, x, axes, eps: float):
    """(x - mean) / sqrt(var + eps) over ``axes`` with the biased variance."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = xp.mean(centered * centered, axis=axes, keepdims=True)
    return centered / xp.sqrt(var + eps)


class _AffineOp(_NormOp):
    """Reads eps and the optional elementwise weight/bias (attrs, inputs or None)."""

    affine_key = "affine"

    def read_affine(self):
        self.eps = self.float_param("eps", default=1e-5)
        if self.eps < 0:
            raise self.error(f"param 'eps' must be non-negative, found {self.eps}")
        self.weight_source = self.optional_tensor("weight")
        self.bias_source = self.optional_tensor("bias")
        if self.node.type.startswith("nn.") and self.bool_param(self.affine_key, default=False):
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


class GroupNorm(_AffineOp):
    """nn.GroupNorm / F.group_norm: statistics per sample over each group of channels (and all spatial dims)."""

    types = ("nn.GroupNorm", "F.group_norm")

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
                             f"{self.num_groups}, found {_describe(x)}")
        batch, channels = x.shape[0], x.shape[1]
        grouped = xp.reshape(x, (batch, self.num_groups, -1))
        out = xp.reshape(_normalize_over(xp, grouped, (2,), self.eps), tuple(x.shape))
        weight, bias = self.affine_values(inputs)
        shape = _channel_shape(channels, x.ndim)
        if weight is not None:
            out = out * xp.reshape(self.per_channel(weight, channels, "weight"), shape)
        if bias is not None:
            out = out + xp.reshape(self.per_channel(bias, channels, "bias"), shape)
        return out


class LayerNorm(_AffineOp):
    """nn.LayerNorm / F.layer_norm: statistics over the last len(normalized_shape) dims."""

    types = ("nn.LayerNorm", "F.layer_norm")
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

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        k = len(self.normalized_shape)
        if not self.backend.is_array(x) or x.ndim < k or tuple(x.shape[-k:]) != self.normalized_shape:
            raise ShapeError(f"{self.node.describe()}: the last {k} dim(s) must be {self.normalized_shape}, "
                             f"found input {_describe(x)}")
        out = _normalize_over(self.xp, x, self.axes, self.eps)
        weight, bias = self.affine_values(inputs)
        for name, value in (("weight", weight), ("bias", bias)):
            if value is not None and tuple(value.shape) != self.normalized_shape:
                raise ShapeError(f"{self.node.describe()}: {name} must have shape {self.normalized_shape}, "
                                 f"found {_describe(value)}")
        if weight is not None:
            out = out * weight
        if bias is not None:
            out = out + bias
        return out


class RMSNorm(_AffineOp):
    """nn.RMSNorm / F.rms_norm: x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dims.

    eps=None (pnnx writes it for the default) is the machine epsilon of the input's dtype, as in PyTorch.
    """

    types = ("nn.RMSNorm", "F.rms_norm")

    def setup(self):
        self.check_known_inputs({"input", "weight"})
        self.normalized_shape = self.ints_param("normalized_shape")
        if not self.normalized_shape or any(d < 1 for d in self.normalized_shape):
            raise self.error(f"param 'normalized_shape' must be positive sizes, found {self.normalized_shape}")
        self.eps = None if self.param("eps", None) is None else self.float_param("eps")
        if self.eps is not None and self.eps < 0:
            raise self.error(f"param 'eps' must be non-negative, found {self.eps}")
        self.weight_source = self.optional_tensor("weight")
        if self.node.type == "nn.RMSNorm" and self.bool_param("elementwise_affine", default=False):
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
                             f"found input {_describe(x)}")
        eps = float(xp.finfo(x.dtype).eps) if self.eps is None else self.eps
        out = x / xp.sqrt(xp.mean(x * x, axis=self.axes, keepdims=True) + eps)
        weight = self.static_weight if self.weight_source[0] != "input" else inputs[self.weight_source[1]]
        if weight is not None:
            if tuple(weight.shape) != self.normalized_shape:
                raise ShapeError(f"{self.node.describe()}: weight must have shape {self.normalized_shape}, "
                                 f"found {_describe(weight)}")
            out = out * weight
        return out


class LocalResponseNorm(_NormOp):
    """nn.LocalResponseNorm / F.local_response_norm over the channel dim (1):
    x / (k + alpha / size * sum of x^2 over a window of ``size`` channels) ** beta.

    The window runs from c - size // 2 to c + (size - 1) // 2 (zeros past the ends, as
    PyTorch pads), and PyTorch divides by ``size`` whatever the window holds.
    """

    types = ("nn.LocalResponseNorm", "F.local_response_norm")

    def setup(self):
        self.require_inputs(1)
        self.size = self.int_param("size")
        if self.size < 1:
            raise self.error(f"param 'size' must be positive, found {self.size}")
        self.alpha = self.float_param("alpha", default=1e-4)
        self.beta = self.float_param("beta", default=0.75)
        self.k = self.float_param("k", default=1.0)

    def forward(self, x):
        if not self.backend.is_array(x) or x.ndim < 3:
            raise ShapeError(f"{self.node.describe()}: expected (N, C, ...) with at least 3 dims, found {_describe(x)}")
        channels = x.shape[1]
        pads = [(0, 0)] * x.ndim
        pads[1] = (self.size // 2, (self.size - 1) // 2)
        squares = self.backend.pad(x * x, tuple(pads), "constant", value=0.0)
        total = squares[:, :channels]
        for offset in range(1, self.size):  # size is small (2 to 5): a sum of shifted views
            total = total + squares[:, offset:offset + channels]
        return x / (total * (self.alpha / self.size) + self.k) ** self.beta


class InstanceNorm(_AffineOp):
    """nn.InstanceNorm1d/2d/3d and F.instance_norm: statistics per sample and channel over the spatial dims.

    nn.InstanceNormNd also accepts an unbatched (C, *spatial) input.  With
    track_running_stats=True an nn.InstanceNorm in eval mode uses its running
    statistics instead, which makes it a per-channel affine like BatchNorm.
    pnnx only writes F.instance_norm for use_input_stats=True, so its running
    statistics (if any) do not change the output.
    """

    types = ("nn.InstanceNorm1d", "nn.InstanceNorm2d", "nn.InstanceNorm3d", "F.instance_norm")
    spatial_dims = {"nn.InstanceNorm1d": 1, "nn.InstanceNorm2d": 2, "nn.InstanceNorm3d": 3}

    def setup(self):
        self.check_known_inputs({"input", "weight", "bias", "running_mean", "running_var"})
        self.read_affine()
        self.spatial = self.spatial_dims.get(self.node.type)  # None for F.instance_norm: dims 2..
        self.use_running_stats = self.spatial is not None and self.bool_param("track_running_stats", default=False)
        channels = self.param("num_features", None)
        self.channels = channels if isinstance(channels, int) else None
        for value in (self.static_weight, self.static_bias):
            if value is not None and (value.ndim != 1 or (self.channels and value.shape[0] != self.channels)):
                raise self.error(f"weight and bias must have shape ({self.channels},), found {tuple(value.shape)}")
        if self.use_running_stats:
            mean, var = (self.node.attrs.get(key) for key in ("running_mean", "running_var"))
            if mean is None or var is None:
                raise self.error("track_running_stats=True needs '@running_mean' and '@running_var'")
            scale = 1.0 / np.sqrt(np.asarray(var, dtype=np.float64) + self.eps)
            if self.static_weight is not None:
                scale = scale * np.asarray(self.node.attrs["weight"], dtype=np.float64)
            shift = -np.asarray(mean, dtype=np.float64) * scale
            if self.static_bias is not None:
                shift = shift + np.asarray(self.node.attrs["bias"], dtype=np.float64)
            self.scale = self.backend.asarray(scale.astype(np.float32))
            self.shift = self.backend.asarray(shift.astype(np.float32))

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.input_position()]
        if self.spatial is None:
            ranks, channel_axis = (3, 4, 5), 1
        else:
            ranks = (self.spatial + 1, self.spatial + 2)
        if not self.backend.is_array(x) or x.ndim not in ranks:
            raise ShapeError(f"{self.node.describe()}: expected an input of rank {' or '.join(map(str, ranks))}, "
                             f"found {_describe(x)}")
        if self.spatial is not None:
            channel_axis = x.ndim - self.spatial - 1
        channels = x.shape[channel_axis]
        if self.channels is not None and channels != self.channels:
            raise ShapeError(f"{self.node.describe()}: expected {self.channels} channels, found input {tuple(x.shape)}")
        shape = _channel_shape(channels, x.ndim, channel_axis)
        if self.use_running_stats:
            return x * xp.reshape(self.scale, shape) + xp.reshape(self.shift, shape)
        out = _normalize_over(xp, x, tuple(range(channel_axis + 1, x.ndim)), self.eps)
        weight, bias = self.affine_values(inputs)
        if weight is not None:
            out = out * xp.reshape(self.per_channel(weight, channels, "weight"), shape)
        if bias is not None:
            out = out + xp.reshape(self.per_channel(bias, channels, "bias"), shape)
        return out


# ---------------------------------------------------------------- F.normalize


class Normalize(_NormOp):
    """F.normalize: x / max(||x||_p along dim, eps)."""

    types = ("F.normalize",)

    def setup(self):
        self.require_inputs(1)
        self.p = self.float_param("p", default=2.0)
        self.dim = self.int_param("dim", default=1)
        self.eps = self.float_param("eps", default=1e-12)

    def norm(self, x, axis: int):
        xp = self.xp
        magnitude = xp.abs(x)
        p = self.p
        if p == float("inf"):
            return xp.max(magnitude, axis=axis, keepdims=True)
        if p == float("-inf"):
            return xp.min(magnitude, axis=axis, keepdims=True)
        if p == 0:  # the count of non-zeros, as torch.linalg.vector_norm defines it
            return xp.sum(xp.astype(magnitude != 0, x.dtype), axis=axis, keepdims=True)
        if p == 1:
            return xp.sum(magnitude, axis=axis, keepdims=True)
        if p == 2:
            return xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True))
        return xp.pow(xp.sum(xp.pow(magnitude, p), axis=axis, keepdims=True), 1.0 / p)

    def forward(self, x):
        if not self.backend.is_array(x) or x.ndim == 0:
            raise ShapeError(f"{self.node.describe()}: expected a tensor of rank >= 1, found {_describe(x)}")
        axis = normalize_axis(self.dim, x.ndim, self)
        return x / self.xp.maximum(self.norm(x, axis), self.xp.asarray(self.eps, dtype=x.dtype))


OPS = [BatchNorm, GroupNorm, LayerNorm, InstanceNorm, Normalize, RMSNorm, LocalResponseNorm]
