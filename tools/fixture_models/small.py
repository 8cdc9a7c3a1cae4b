"""Tiny one-purpose models, one per foundation op or edge case.

Each fixture should fail for one reason only, so a loader bug points at one op. Input
sizes are odd on purpose: they hit ceil_mode, stride and adaptive-pool edge cases.
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import Fn, Single, randomize_batchnorm, spec

class FlattenLinear(nn.Module):
    def __init__(self, features: int, out: int):
        super().__init__()
        self.fc = nn.Linear(features, out)

    def forward(self, x):
        return self.fc(torch.flatten(x, 1))


class ViewLinear(nn.Module):
    """``x.view(x.size(0), -1)``: pnnx bakes the traced batch into the reshape unless
    the export has a second input shape (then it writes -1 and ``?`` dims)."""

    def __init__(self, features: int, out: int):
        super().__init__()
        self.fc = nn.Linear(features, out)

    def forward(self, x):
        return self.fc(x.view(x.size(0), -1))


class ResidualScale(nn.Module):
    """Residual add and per-channel affine from parameters of rank 4, 3 and 0.

    pnnx turns the parameters into pnnx.Attribute ops and the arithmetic into one
    pnnx.Expression; the (C,1,1) shape makes broadcasting non-trivial. pnnx folds the
    0-d parameter into the expression as a float literal (it gets no Attribute).
    """

    def __init__(self, c: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(1, c, 1, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(c, 1, 1))
        self.alpha = nn.Parameter(torch.tensor(0.75))

    def forward(self, x):
        y = x + self.conv(x)
        return F.relu((y * self.scale + self.shift) * self.alpha)


class ReluVariants(nn.Module):
    """nn.ReLU, nn.ReLU(inplace), F.relu, torch.relu and Tensor.relu, separated by
    arithmetic so pnnx cannot merge them."""

    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()
        self.relu_inplace = nn.ReLU(inplace=True)

    def forward(self, x):
        a = self.relu(x)
        b = F.relu(a * 2.0 - 0.5)
        c = torch.relu(b - x)
        d = (c - 0.25 + x).relu()
        return self.relu_inplace(d - 0.5 * x)


class BatchNormAfterRelu(nn.Module):
    """A BatchNorm that cannot be folded into a conv, so nn.BatchNorm2d survives export."""

    def __init__(self, c: int = 4):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(F.relu(x))


class TwoInTwoOut(nn.Module):
    """Two inputs (one broadcast per channel) and two outputs: a tuple in PNNX."""

    def forward(self, a, b):
        return a * b + 1.0, F.relu(a - b)


def _bn_model() -> nn.Module:
    return randomize_batchnorm(BatchNormAfterRelu(), (8, 4, 5, 5), scale=0.5)


MODELS = {
    # --- convolution
    "conv2d_stride2": spec(lambda: Single(nn.Conv2d(3, 4, 3, stride=2, padding=1)), (1, 3, 9, 11),
                           description="Conv2d 3x3 stride 2 pad 1 on an odd-sized input"),
    "conv2d_dilation2": spec(lambda: Single(nn.Conv2d(3, 4, 3, padding=2, dilation=2)), (1, 3, 8, 10),
                             description="Conv2d 3x3 dilation 2 pad 2"),
    "conv2d_groups2": spec(lambda: Single(nn.Conv2d(4, 6, 3, padding=1, groups=2)), (1, 4, 7, 7),
                           description="Conv2d groups=2 (4 -> 6 channels)"),
    "conv2d_depthwise": spec(lambda: Single(nn.Conv2d(4, 8, 3, padding=1, groups=4)), (1, 4, 7, 7),
                             description="depthwise Conv2d with channel multiplier 2 (groups=4, 4 -> 8)"),
    "conv2d_nobias": spec(lambda: Single(nn.Conv2d(3, 4, (3, 5), padding=(1, 2), bias=False)), (1, 3, 7, 9),
                          description="Conv2d without bias, non-square 3x5 kernel"),
    "conv2d_reflect": spec(lambda: Single(nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="reflect")),
                           (1, 3, 7, 9), description="Conv2d padding_mode=reflect, padding (1,2)"),
    "conv2d_replicate": spec(lambda: Single(nn.Conv2d(3, 4, 3, stride=2, padding=(2, 1),
                                                      padding_mode="replicate")),
                             (1, 3, 7, 9), description="Conv2d padding_mode=replicate, stride 2, padding (2,1)"),
    "conv2d_circular": spec(lambda: Single(nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="circular")),
                            (1, 3, 7, 9), description="Conv2d padding_mode=circular, padding (1,2)"),
    "conv2d_same": spec(lambda: Single(nn.Conv2d(3, 4, 4, padding="same")), (1, 3, 7, 9),
                        description="Conv2d padding='same' with an even 4x4 kernel (asymmetric pad 1/2)"),
    # --- pooling
    "maxpool2d_ceil": spec(lambda: Single(nn.MaxPool2d(2, 2, ceil_mode=True)), (1, 3, 7, 9),
                           description="MaxPool2d 2x2 s2 ceil_mode on 7x9 -> 4x5 (partial last window)"),
    "maxpool2d_ceil_pad": spec(lambda: Single(nn.MaxPool2d(2, 2, padding=1, ceil_mode=True)), (1, 3, 5, 6),
                               description="MaxPool2d 2x2 s2 pad 1 ceil_mode on 5x6 -> 3x4: the last H "
                                           "window would start in the padding and is dropped"),
    "maxpool2d_pad_dil": spec(lambda: Fn(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2)),
                              (1, 3, 9, 11), description="F.max_pool2d 3x3 s2 pad 1 dilation 2 on 9x11 -> 4x5"),
    "adaptive_avgpool_1x1": spec(lambda: Single(nn.AdaptiveAvgPool2d((1, 1))), (1, 3, 5, 7),
                                 description="nn.AdaptiveAvgPool2d to (1,1)"),
    "adaptive_avgpool_3x5": spec(lambda: Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 5))), (1, 3, 7, 9),
                                 description="F.adaptive_avg_pool2d 7x9 -> (3,5): overlapping uneven windows"),
    # --- linear, shape
    "flatten_linear": spec(lambda: FlattenLinear(3 * 4 * 5, 6), (1, 3, 4, 5),
                           description="torch.flatten(x, 1) then nn.Linear(60, 6)"),
    "reshape_batch_static": spec(lambda: ViewLinear(3 * 4 * 5, 6), (1, 3, 4, 5), extra_batches=(),
                                 description="x.view(x.size(0), -1) exported at batch 1: pnnx writes "
                                             "Tensor.reshape shape=(1,60), so only batch 1 is valid"),
    "reshape_batch_dynamic": spec(lambda: ViewLinear(3 * 4 * 5, 6), (1, 3, 4, 5), dynamic_batch=2,
                                  description="x.view(x.size(0), -1) exported with inputs2 at batch 2: "
                                              "'?' batch dims and Tensor.reshape shape=(-1,60)"),
    # --- elementwise
    "residual_scale": spec(ResidualScale, (1, 4, 6, 6),
                           description="relu((x + conv(x)) * p(1,C,1,1) + p(C,1,1)) * p(): two "
                                       "pnnx.Attribute, one pnnx.Expression, 0-d param folded"),
    "relu_variants": spec(ReluVariants, (1, 3, 5, 5),
                          description="nn.ReLU, nn.ReLU(inplace), F.relu, torch.relu, Tensor.relu"),
    "batchnorm2d": spec(_bn_model, (1, 4, 5, 5),
                        description="unfoldable nn.BatchNorm2d (after a ReLU) with random stats"),
    "two_in_two_out": spec(TwoInTwoOut, (1, 4, 6, 6), (1, 4, 1, 1),
                           description="two inputs (second broadcast per channel), two outputs"),
}
