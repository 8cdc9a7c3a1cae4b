"""Convolution, pooling and normalisation fixtures: one op and one edge case each.

Each comment says which op type pnnx really writes for the model (checked on the
exported .pnnx.param): pnnx folds constant weights of F.conv* into nn.Conv*,
turns F.batch_norm/F.group_norm/F.layer_norm/F.instance_norm with constant
weights into the nn.* form, and folds a BatchNorm that follows a conv or a
Linear into it. So the F.* spellings appear only when a weight is computed in
the graph or is a graph input, or when the F.* call has no weight at all.

Sizes are odd on purpose (ceil_mode, stride and adaptive-bin edge cases).
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import Fn, Single, randomize_batchnorm, spec

def _randomize_affine(module: nn.Module) -> nn.Module:
    """Non-trivial affine weights: the default ones/zeros would hide a missing weight or bias."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("weight"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.5)
    return module


# ---------------------------------------------------------------- convolution


class ConvWeightInput(nn.Module):
    """F.conv2d with weight and bias as graph inputs: pnnx writes F.conv2d with $weight and $bias.

    Every input's dim 0 follows the batch, so the out channels (weight dim 0) do too.
    """

    def forward(self, x, weight, bias):
        return F.conv2d(x, weight, bias, stride=2, padding=1)


class Conv1dWeightExpr(nn.Module):
    """The weight is computed in the graph (attribute * a graph input) and the bias is a
    pnnx.Attribute: pnnx writes pnnx.Expression -> F.conv1d $weight, pnnx.Attribute -> $bias.

    ``scale`` is (B, 1, 1): it broadcasts over the (4, 3, 3) weight at batch 1 and 4.
    """

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3, 3) * 0.5)
        self.bias = nn.Parameter(torch.randn(4))

    def forward(self, x, scale):
        return F.conv1d(x, self.weight * scale, self.bias, stride=2, padding=2, dilation=2)


class ConvTranspose2dWeightExpr(nn.Module):
    """F.conv_transpose2d with a computed weight: pnnx keeps F.conv_transpose2d ($weight, bias=None)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 1, 3, 3) * 0.5)

    def forward(self, x, scale):
        return F.conv_transpose2d(x, self.weight * scale, None, stride=2, padding=1, output_padding=1, groups=2)


class ConvTranspose1dWeightExpr(nn.Module):
    """F.conv_transpose1d with a computed weight and a pnnx.Attribute bias."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 2, 3) * 0.5)
        self.bias = nn.Parameter(torch.randn(2))

    def forward(self, x, scale):
        return F.conv_transpose1d(x, self.weight * scale, self.bias, stride=3, padding=2)


# ---------------------------------------------------------------- pooling


class AdaptiveMaxWithIndices(nn.Module):
    """F.adaptive_max_pool2d returning (values, indices): both are model outputs (indices as i64)."""

    def forward(self, x):
        return F.adaptive_max_pool2d(x, (3, 4), return_indices=True)


# ---------------------------------------------------------------- normalisation


class BatchNorm1dAfterRelu(nn.Module):
    """Linear -> ReLU -> BatchNorm1d on (N, C): the ReLU stops pnnx folding the BN into the Linear."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 6)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):
        return self.bn(F.relu(self.fc(x)))


class BatchNormFunctional(nn.Module):
    """F.batch_norm without weight/bias: pnnx keeps F.batch_norm with the running stats as
    pnnx.Attribute inputs ($running_mean, $running_var) and weight=None bias=None."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.randn(4) * 0.5)
        self.register_buffer("var", torch.rand(4) + 0.5)

    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, None, None, False, 0.1, 1e-3)


class _ScaledAffine(nn.Module):
    """A norm whose affine weight and bias are computed in the graph from a ``scale`` input of shape (B,).

    (B,) broadcasts over the (channels,) weight at batch 1 and at batch ``channels``: the
    fixture's two batches.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels))


class LayerNormComputedWeight(_ScaledAffine):
    """F.layer_norm whose weight is computed in the graph: pnnx keeps F.layer_norm with $weight."""

    def __init__(self):
        super().__init__(7)

    def forward(self, x, scale):
        return F.layer_norm(x, (7,), self.weight * scale, self.bias, 1e-4)


class InstanceNormInputs(_ScaledAffine):
    """F.instance_norm with weight and bias computed in the graph ($weight, $bias)."""

    def __init__(self):
        super().__init__(3)

    def forward(self, x, scale):
        return F.instance_norm(x, weight=self.weight * scale, bias=self.bias + scale)


def _bn(module: nn.Module, calib_shape) -> nn.Module:
    return randomize_batchnorm(module, calib_shape, scale=0.5)


def _bn_noaffine() -> nn.Module:
    """randomize_batchnorm needs affine weights, so set the running stats by hand."""
    m = Single(nn.BatchNorm2d(3, affine=False, eps=1e-3))
    with torch.no_grad():
        m.op.running_mean.normal_(0.0, 0.5)
        m.op.running_var.uniform_(0.5, 1.5)
    return m


def _instance_norm_running() -> nn.Module:
    m = Single(nn.InstanceNorm2d(3, affine=True, track_running_stats=True))
    _randomize_affine(m)
    with torch.no_grad():
        m.op.running_mean.normal_(0.0, 0.5)
        m.op.running_var.uniform_(0.5, 1.5)
    return m


MODELS = {
    # --- convolution (nn.*)
    "conv1d_stride_pad": spec(lambda: Single(nn.Conv1d(3, 4, 3, stride=2, padding=1)), (1, 3, 9),
                              description="nn.Conv1d k3 s2 p1 on an odd length"),
    "conv1d_groups_dil_nobias": spec(lambda: Single(nn.Conv1d(4, 6, 3, padding=2, dilation=2, groups=2,
                                                              bias=False)), (1, 4, 8),
                                     description="nn.Conv1d groups=2 dilation=2 without bias"),
    "convtranspose1d_groups": spec(lambda: Single(nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                                     output_padding=1, groups=2)), (1, 4, 7),
                                   description="nn.ConvTranspose1d s2 p1 output_padding=1 groups=2"),
    "convtranspose2d": spec(lambda: Single(nn.ConvTranspose2d(2, 3, (3, 4), stride=2, padding=(1, 2),
                                                              output_padding=(1, 0))), (1, 2, 4, 5),
                            description="nn.ConvTranspose2d non-square kernel, padding and output_padding"),
    "convtranspose2d_groups_dil": spec(lambda: Single(nn.ConvTranspose2d(4, 2, 3, stride=(2, 3), padding=1,
                                                                         output_padding=(1, 2), dilation=2,
                                                                         groups=2, bias=False)), (1, 4, 3, 3),
                                       description="nn.ConvTranspose2d groups=2 dilation=2 stride (2,3) "
                                                   "output_padding (1,2) (< dilation), no bias"),
    "convtranspose2d_big_pad": spec(lambda: Single(nn.ConvTranspose2d(2, 3, 2, stride=3, padding=(2, 1))),
                                    (1, 2, 5, 4),
                                    description="nn.ConvTranspose2d whose padding exceeds the kernel: "
                                                "outputs between windows are bias only, borders cropped"),
    "convtranspose3d": spec(lambda: Single(nn.ConvTranspose3d(2, 2, 2, stride=2, padding=(0, 1, 0))),
                            (1, 2, 2, 3, 3), description="nn.ConvTranspose3d k2 s2"),
    # --- convolution (F.*, weight not a constant)
    "f_conv2d_weight_input": spec(ConvWeightInput, (1, 3, 7, 8), (1, 3, 3, 3), (1,),
                                  description="F.conv2d with $weight and $bias graph inputs (out channels = batch)"),
    "f_conv1d_weight_expr": spec(Conv1dWeightExpr, (1, 3, 11), (1, 1, 1), extra_batches=(4,),
                                 description="F.conv1d, weight = attribute * input (pnnx.Expression), "
                                             "bias from pnnx.Attribute, dilation 2"),
    "f_conv_transpose2d_weight_expr": spec(ConvTranspose2dWeightExpr, (1, 4, 3, 4), (1, 1, 1, 1),
                                           extra_batches=(4,),
                                           description="F.conv_transpose2d, computed weight, groups=2, "
                                                       "output_padding=1, bias=None"),
    "f_conv_transpose1d_weight_expr": spec(ConvTranspose1dWeightExpr, (1, 4, 6), (1, 1, 1), extra_batches=(4,),
                                           description="F.conv_transpose1d s3 p2, computed weight, "
                                                       "pnnx.Attribute bias"),
    # --- average pooling
    "avgpool2d_ceil_pad": spec(lambda: Single(nn.AvgPool2d(3, 2, padding=1, ceil_mode=True)), (1, 2, 6, 7),
                               description="nn.AvgPool2d k3 s2 p1 ceil_mode count_include_pad: the last "
                                           "window hangs past the padding and divides by less than 9"),
    "avgpool2d_exclude_pad": spec(lambda: Single(nn.AvgPool2d(3, 2, padding=1, ceil_mode=True,
                                                              count_include_pad=False)), (1, 2, 6, 7),
                                  description="nn.AvgPool2d ceil_mode, count_include_pad=False"),
    "avgpool2d_divisor": spec(lambda: Single(nn.AvgPool2d((3, 2), (2, 1), padding=(1, 0), ceil_mode=True,
                                                          divisor_override=4)), (1, 2, 6, 5),
                              description="nn.AvgPool2d divisor_override=4, non-square kernel and stride"),
    "f_avg_pool2d": spec(lambda: Fn(lambda x: F.avg_pool2d(x, (2, 3), stride=(3, 2), padding=(1, 1),
                                                           count_include_pad=False)), (1, 2, 7, 8),
                         description="F.avg_pool2d k(2,3) s(3,2) p1 count_include_pad=False, floor mode"),
    "avgpool1d_ceil": spec(lambda: Single(nn.AvgPool1d(4, 3, padding=2, ceil_mode=True)), (1, 3, 9),
                           description="nn.AvgPool1d k4 s3 p2 ceil_mode (count_include_pad)"),
    "f_avg_pool1d_exclude_pad": spec(lambda: Fn(lambda x: F.avg_pool1d(x, 3, 2, 1, True, False)), (1, 3, 8),
                                     description="F.avg_pool1d k3 s2 p1 ceil_mode count_include_pad=False"),
    # --- adaptive max pooling (and the None output size)
    "adaptive_maxpool2d": spec(lambda: Single(nn.AdaptiveMaxPool2d((3, 4))), (1, 2, 7, 9),
                               description="nn.AdaptiveMaxPool2d 7x9 -> 3x4 (overlapping uneven bins)"),
    "adaptive_maxpool2d_none": spec(lambda: Single(nn.AdaptiveMaxPool2d((None, 4))), (1, 2, 5, 9),
                                    description="nn.AdaptiveMaxPool2d (None, 4): pnnx writes output_size=(0,4)"),
    "f_adaptive_max_pool2d": spec(lambda: Fn(lambda x: F.adaptive_max_pool2d(x, 3)), (1, 2, 7, 5),
                                  description="F.adaptive_max_pool2d: pnnx writes return_indices=True and "
                                              "an unused indices output"),
    "f_adaptive_max_pool2d_indices": spec(AdaptiveMaxWithIndices, (1, 2, 7, 9),
                                          description="F.adaptive_max_pool2d values and indices as outputs"),
    "adaptive_maxpool1d": spec(lambda: Single(nn.AdaptiveMaxPool1d(4)), (1, 3, 10),
                               description="nn.AdaptiveMaxPool1d 10 -> 4"),
    "f_adaptive_max_pool1d": spec(lambda: Fn(lambda x: F.adaptive_max_pool1d(x, 3)), (1, 3, 7),
                                  description="F.adaptive_max_pool1d 7 -> 3 (unused indices output)"),
    "adaptive_avgpool2d_none": spec(lambda: Single(nn.AdaptiveAvgPool2d((4, None))), (1, 2, 7, 5),
                                    description="nn.AdaptiveAvgPool2d (4, None): pnnx writes output_size=(4,0)"),
    # --- batch norm (not folded)
    "batchnorm1d_nc": spec(lambda: _bn(BatchNorm1dAfterRelu(), (16, 5)), (1, 5),
                           description="Linear -> ReLU -> nn.BatchNorm1d on (N, C)"),
    "batchnorm1d_ncl": spec(lambda: _bn(Single(nn.BatchNorm1d(3)), (8, 3, 7)), (1, 3, 7),
                            description="nn.BatchNorm1d right after the input, on (N, C, L)"),
    "batchnorm2d_noaffine": spec(_bn_noaffine, (1, 3, 4, 5), description="nn.BatchNorm2d affine=False eps=1e-3"),
    "f_batch_norm": spec(BatchNormFunctional, (1, 4, 3, 5),
                         description="F.batch_norm, running stats from pnnx.Attribute inputs, no weight"),
    # --- group / layer / instance norm
    "groupnorm": spec(lambda: _randomize_affine(Single(nn.GroupNorm(3, 6))), (1, 6, 3, 3),
                      description="nn.GroupNorm 3 groups of 2 channels, affine"),
    "f_group_norm_noaffine": spec(lambda: Fn(lambda x: F.group_norm(x, 2, None, None, 1e-4)), (1, 6, 7),
                                  description="F.group_norm without weight on (N, C, L)"),
    "layernorm_2d": spec(lambda: _randomize_affine(Single(nn.LayerNorm((3, 5)))), (1, 2, 3, 5),
                         description="nn.LayerNorm over the last two dims, affine"),
    "layernorm_noaffine": spec(lambda: Single(nn.LayerNorm(7, eps=1e-3, elementwise_affine=False)), (1, 4, 7),
                               description="nn.LayerNorm(7) elementwise_affine=False, eps 1e-3"),
    "f_layer_norm_weight_expr": spec(LayerNormComputedWeight, (1, 3, 7), (1,), extra_batches=(7,),
                                     description="F.layer_norm with a computed $weight and an Attribute $bias"),
    "instancenorm2d_affine": spec(lambda: _randomize_affine(Single(nn.InstanceNorm2d(3, affine=True))),
                                  (1, 3, 3, 4), description="nn.InstanceNorm2d affine"),
    "instancenorm1d": spec(lambda: Single(nn.InstanceNorm1d(3)), (1, 3, 7),
                           description="nn.InstanceNorm1d without affine"),
    "instancenorm2d_running": spec(_instance_norm_running, (1, 3, 4, 5),
                                   description="nn.InstanceNorm2d track_running_stats=True: eval mode uses "
                                               "the running statistics"),
    "f_instance_norm": spec(InstanceNormInputs, (1, 3, 4, 5), (1,),
                            description="F.instance_norm with computed $weight and $bias"),
    # F.normalize (p=inf is left to the unit tests: pnnx writes ``p=inf`` and its own generated
    # Python then fails with a NameError, so the export self-check cannot run)
    "f_normalize": spec(lambda: Fn(lambda x: F.normalize(x)), (1, 3, 4, 5),
                        description="F.normalize defaults: p=2 over dim 1, eps 1e-12"),
    "f_normalize_p3_negdim": spec(lambda: Fn(lambda x: F.normalize(x, p=3.0, dim=-1, eps=1e-3)), (1, 3, 4, 5),
                                  description="F.normalize p=3 over dim -1, eps 1e-3"),
    "f_normalize_p1": spec(lambda: Fn(lambda x: F.normalize(x, p=1.0, dim=-2)), (1, 3, 4, 5),
                           description="F.normalize p=1 over dim -2"),
}
