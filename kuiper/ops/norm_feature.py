"""Batch normalisation over every dim but one feature dim, as XLA defines it: inference, training, grad.

``feature`` names the dim of the per-feature vectors (scale, offset, mean, variance); statistics
are taken over all the other dims. Training gives the batch mean and the biased batch variance.
"""

from __future__ import annotations

from .base import Op


class _FeatureNorm(Op):
    inputs = 0

    def setup(self):
        self.require_inputs(self.inputs)
        self.feature = self.int_param("feature")
        self.epsilon = self.float_param("epsilon")

    def along_feature(self, vector, rank: int):
        """A (C,) vector shaped to broadcast along the feature dim of a rank-``rank`` array."""
        if not 0 <= self.feature < rank:
            raise self.error(f"feature dim {self.feature} is out of range for an input of rank {rank}")
        shape = [1] * rank
        shape[self.feature] = -1
        return self.xp.reshape(vector, tuple(shape))

    def other_axes(self, rank: int) -> tuple[int, ...]:
        return tuple(axis for axis in range(rank) if axis != self.feature)

    def inverse_deviation(self, variance, rank: int):
        return self.along_feature(1 / self.xp.sqrt(variance + self.epsilon), rank)


class BatchNormInference(_FeatureNorm):
    """Inputs ``x, scale, offset, mean, variance``: (x - mean) / sqrt(variance + epsilon) * scale + offset."""

    types = ("BatchNormInference",)
    fresh_output = True
    inputs = 5

    def forward(self, x, scale, offset, mean, variance):
        rank = x.ndim
        normalized = (x - self.along_feature(mean, rank)) * self.inverse_deviation(variance, rank)
        return (normalized * self.along_feature(scale, rank) + self.along_feature(offset, rank)).astype(x.dtype)


class BatchNormTraining(_FeatureNorm):
    """Inputs ``x, scale, offset``: outputs the normalised x, the batch mean and the batch variance."""

    types = ("BatchNormTraining",)
    fresh_output = True
    inputs = 3

    def forward(self, x, scale, offset):
        xp, rank, axes = self.xp, x.ndim, self.other_axes(x.ndim)
        mean = xp.mean(x, axis=axes)
        variance = xp.mean(xp.square(x - self.along_feature(mean, rank)), axis=axes)
        normalized = (x - self.along_feature(mean, rank)) * self.inverse_deviation(variance, rank)
        y = normalized * self.along_feature(scale, rank) + self.along_feature(offset, rank)
        return y.astype(x.dtype), mean.astype(x.dtype), variance.astype(x.dtype)


class BatchNormGrad(_FeatureNorm):
    """Inputs ``x, scale, mean, variance, grad_y``: outputs the gradients of x, scale and offset."""

    types = ("BatchNormGrad",)
    fresh_output = True
    inputs = 5

    def forward(self, x, scale, mean, variance, grad_y):
        xp, rank, axes = self.xp, x.ndim, self.other_axes(x.ndim)
        inverse = self.inverse_deviation(variance, rank)
        centered = x - self.along_feature(mean, rank)
        grad_offset = xp.sum(grad_y, axis=axes)
        grad_scale = xp.sum(grad_y * centered * inverse, axis=axes)
        count = x.size // max(1, x.shape[self.feature])
        mean_grad = self.along_feature(grad_offset / count, rank)
        mean_grad_centered = self.along_feature(xp.sum(grad_y * centered, axis=axes) / count, rank)
        grad_x = self.along_feature(scale, rank) * inverse * (
            grad_y - mean_grad - centered * mean_grad_centered * inverse * inverse)
        return grad_x.astype(x.dtype), grad_scale.astype(x.dtype), grad_offset.astype(x.dtype)


OPS = [BatchNormInference, BatchNormTraining, BatchNormGrad]
