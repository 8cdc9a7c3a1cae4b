"""Per-channel normalisation: nn.BatchNorm1d/2d/3d, F.batch_norm, nn.InstanceNorm1d/2d/3d, F.instance_norm.

Where the statistics are constants (BatchNorm, InstanceNorm with
track_running_stats), the op folds them with the affine weights into one
per-channel ``scale`` and ``shift`` at build time, so running it is one
multiply-add.  The F.* forms that pnnx keeps take running stats, weight and
bias as inputs (``$running_mean``, ``$weight`` ...) or write ``weight=None``
params; such inputs are folded on every call.
"""

from __future__ import annotations

import numpy as np  # only to fold constant statistics and weights once, at build time

from ..errors import ShapeError
from .norm_base import AffineNormOp, NormOp, channel_shape, describe_value, normalize_over


class BatchNorm(NormOp):
    """nn.BatchNorm1d/2d/3d (inference: running statistics) and F.batch_norm.

    pnnx folds a BatchNorm that follows a conv or linear layer into it; the
    ones that remain (after an input, an activation ...) come here.  Channels
    are axis 1: (N, C) or (N, C, *spatial).
    """

    types = ("BatchNorm",)

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
        if self.bool_param("constant_affine", default=False):
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
            raise ShapeError(f"{self.node.describe()}: expected (N, C) or (N, C, ...), found {describe_value(x)}")
        channels = x.shape[1]
        xp = self.xp
        if self.static:
            if channels != self.channels:
                raise ShapeError(f"{self.node.describe()}: expected {self.channels} channels (dim 1), "
                                 f"found input {tuple(x.shape)}")
            shape = channel_shape(channels, x.ndim)
            scale, shift = self.cached(
                self._shaped, x.ndim, lambda: (xp.reshape(self.scale, shape), xp.reshape(self.shift, shape))
            )
        else:
            scale, shift = self._fold_inputs(inputs, channels)
            shape = channel_shape(channels, x.ndim)
            scale, shift = xp.reshape(scale, shape), xp.reshape(shift, shape)
        return x * scale + shift


class InstanceNorm(AffineNormOp):
    """nn.InstanceNorm1d/2d/3d and F.instance_norm: statistics per sample and channel over the spatial dims.

    nn.InstanceNormNd also accepts an unbatched (C, *spatial) input.  With
    track_running_stats=True an nn.InstanceNorm in eval mode uses its running
    statistics instead, which makes it a per-channel affine like BatchNorm.
    pnnx only writes F.instance_norm for use_input_stats=True, so its running
    statistics (if any) do not change the output.
    """

    types = ("InstanceNorm",)

    def setup(self):
        self.check_known_inputs({"input", "weight", "bias", "running_mean", "running_var"})
        self.read_affine()
        self.spatial = self.optional_int_param("spatial_dims")  # None: (N, C, *spatial), any rank 3 to 5
        if self.spatial not in (None, 1, 2, 3):
            raise self.unsupported("spatial_dims", self.spatial, [None, 1, 2, 3])
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
                             f"found {describe_value(x)}")
        if self.spatial is not None:
            channel_axis = x.ndim - self.spatial - 1
        channels = x.shape[channel_axis]
        if self.channels is not None and channels != self.channels:
            raise ShapeError(f"{self.node.describe()}: expected {self.channels} channels, found input {tuple(x.shape)}")
        shape = channel_shape(channels, x.ndim, channel_axis)
        if self.use_running_stats:
            return x * xp.reshape(self.scale, shape) + xp.reshape(self.shift, shape)
        out = normalize_over(xp, x, tuple(range(channel_axis + 1, x.ndim)), self.eps)
        weight, bias = self.affine_values(inputs)
        if weight is not None:
            out = out * xp.reshape(self.per_channel(weight, channels, "weight"), shape)
        if bias is not None:
            out = out + xp.reshape(self.per_channel(bias, channels, "bias"), shape)
        return out


OPS = [BatchNorm, InstanceNorm]
