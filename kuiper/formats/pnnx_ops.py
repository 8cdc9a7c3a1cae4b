"""PNNX's op vocabulary -> kuiper's canonical op set.

Ops in ``kuiper/ops`` declare neutral type names (``ReLU``, ``Conv2d``, ``Reduction``,
``Transpose`` ...) and read typed params.  PNNX spells one op many ways (``nn.ReLU``,
``F.relu``, ``torch.relu``) and lets the spelling carry meaning (``torch.amax`` vs
``torch.amin``, ``nn.InstanceNorm2d``'s two spatial dims, an ``nn.`` module's weights
being constants).  This table is the one place that knows those spellings: the PNNX
frontend translates every op through it at load (``translate``), stating what a
spelling meant as typed params.  A type that is not in the table (a plugin's
``models.yolo.Detect``, ``pnnx.Expression``) passes through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..model_ir import OpNode


@dataclass(frozen=True)
class Translation:
    """One PNNX spelling: the canonical type, the typed params it implies, and (rarely) a node rewrite."""

    canonical: str
    params: Mapping[str, Any] = field(default_factory=dict)
    adapt: Callable[[OpNode], OpNode] | None = None


# PyTorch dtype spellings in PNNX params -> array-API dtype names.
TORCH_DTYPES = {
    "torch.float": "float32", "torch.float32": "float32", "torch.double": "float64", "torch.float64": "float64",
    "torch.half": "float16", "torch.float16": "float16", "torch.long": "int64", "torch.int64": "int64",
    "torch.int": "int32", "torch.int32": "int32", "torch.short": "int16", "torch.int16": "int16",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
}


def _neutral_dtype(node: OpNode) -> OpNode:
    """``dtype=torch.float`` -> ``dtype=float32``; an unknown spelling stays for the op to reject."""
    dtype = node.params.get("dtype")
    if isinstance(dtype, str) and dtype in TORCH_DTYPES:
        return replace(node, params={**node.params, "dtype": TORCH_DTYPES[dtype]})
    return node


def _constant_affine(key: str, default: bool) -> Callable[[OpNode], OpNode]:
    """An ``nn.`` norm module with ``key`` (affine / elementwise_affine) true keeps its weight and
    bias as constants ``@weight``/``@bias``: say so as ``constant_affine``."""

    def adapt(node: OpNode) -> OpNode:
        return replace(node, params={**node.params, "constant_affine": node.params.get(key, default)})

    return adapt


def _bound_input(bound: str) -> Callable[[OpNode], OpNode]:
    """``aten::clamp_min(x, v)``: two inputs, x first unless bound to ``$input``; the other is the bound."""

    def adapt(node: OpNode) -> OpNode:
        keys = list(node.input_keys)
        if len(keys) == 2:
            x_at = keys.index("input") if "input" in keys else 0
            keys[x_at], keys[1 - x_at] = "input", bound
        return replace(node, input_keys=keys)

    return adapt


def _renamed_inputs(names: Mapping[str, str]) -> Callable[[OpNode], OpNode]:
    def adapt(node: OpNode) -> OpNode:
        return replace(node, input_keys=[names.get(key, key) for key in node.input_keys])

    return adapt


def _rows(table: str) -> list[tuple[str, tuple[str, ...]]]:
    """``canonical spelling spelling ...`` per line -> (canonical, spellings)."""
    return [(row.split()[0], tuple(row.split()[1:])) for row in table.strip().splitlines()]


# Activations whose canonical type is PyTorch's module name: PNNX spells each ``nn.<Name>`` and
# ``F.<name in lower case>``; those in _ALSO_IN_TORCH also ``torch.<name in lower case>``.
_ACTIVATIONS = """
ReLU ReLU6 PReLU Hardtanh Threshold Hardshrink Softshrink Sigmoid Tanh LogSigmoid Softsign Tanhshrink
ELU SELU CELU GELU SiLU Mish Hardsigmoid Hardswish Softplus GLU RReLU
""".split()
_ALSO_IN_TORCH = ("ReLU", "Sigmoid", "Tanh", "SELU", "CELU")


def _activation_spellings(name: str) -> tuple[str, ...]:
    lower = name.lower()
    return (f"nn.{name}", f"F.{lower}", *((f"torch.{lower}",) if name in _ALSO_IN_TORCH else ()))


# Canonical type, then the PNNX spellings that all mean the same op.
_SAME_MEANING = _rows("""
LeakyReLU                 nn.LeakyReLU F.leaky_relu
Clamp                     torch.clamp
MultiheadAttention        nn.MultiheadAttention
ScaledDotProductAttention F.scaled_dot_product_attention
BitwiseNot                torch.bitwise_not
LogicalNot                torch.logical_not
Where                     torch.where
Complex                   torch.complex
ImagPart                  torch.imag
RealPart                  torch.real
ViewAsComplex             torch.view_as_complex
ViewAsReal                torch.view_as_real
Concat                    torch.cat torch.concat torch.concatenate
Chunk                     torch.chunk Tensor.chunk
Split                     torch.split Tensor.split
Stack                     torch.stack
TensorSplit               torch.tensor_split Tensor.tensor_split
Unbind                    torch.unbind Tensor.unbind
AffineGrid                F.affine_grid
GridSample                F.grid_sample
Fill                      Tensor.fill
IndexPut                  Tensor.index_put
MaskedFill                Tensor.masked_fill
SliceCopy                 Tensor.slice_copy
Constant                  pnnx.Attribute
Einsum                    torch.einsum
LinearInputs              F.linear
Linear                    nn.Linear
MatVec                    torch.mv
MatMul                    torch.matmul
LocalResponseNorm         nn.LocalResponseNorm F.local_response_norm
Normalize                 F.normalize
Embedding                 nn.Embedding
EmbeddingInputs           F.embedding
MakeList                  prim::ListConstruct
MakeTuple                 prim::TupleConstruct
Unpack                    prim::TupleUnpack prim::ListUnpack
SliceIndexes              pnnx.SliceIndexes
TypeAs                    Tensor.type_as
PadWithMode               F.pad
LogSumExp                 torch.logsumexp
Norm                      torch.norm
ChannelShuffle            nn.ChannelShuffle F.channel_shuffle
Interpolate               F.upsample F.interpolate nn.Upsample
PixelShuffle              nn.PixelShuffle F.pixel_shuffle
PixelUnshuffle            nn.PixelUnshuffle F.pixel_unshuffle
UpsampleBilinear          F.upsample_bilinear nn.UpsamplingBilinear2d
UpsampleNearest           F.upsample_nearest nn.UpsamplingNearest2d
TopKDim                   torch.topk
Diag                      torch.diag
MaskedSelect              torch.masked_select
ScatterAdd                torch.scatter_add
SliceScatter              torch.slice_scatter
Identity                  Tensor.contiguous torch.clone Tensor.clone torch.positive
Expand                    Tensor.expand
ExpandAs                  Tensor.expand_as
Flatten                   torch.flatten Tensor.flatten
Reverse                   torch.flip Tensor.flip
MatrixTranspose           torch.t Tensor.t
Transpose                 Tensor.permute torch.permute
Repeat                    Tensor.repeat
RepeatInterleave          torch.repeat_interleave Tensor.repeat_interleave
Reshape                   Tensor.reshape Tensor.view
ReshapeAs                 Tensor.reshape_as Tensor.view_as
Roll                      torch.roll Tensor.roll
Squeeze                   torch.squeeze Tensor.squeeze
Tile                      torch.tile Tensor.tile
SwapAxes                  torch.transpose Tensor.transpose
Unflatten                 Tensor.unflatten torch.unflatten
Unsqueeze                 torch.unsqueeze Tensor.unsqueeze
TakeAlongAxis             torch.gather Tensor.gather
Index                     Tensor.index
IndexSelect               torch.index_select Tensor.index_select
Narrow                    torch.narrow Tensor.narrow
Select                    Tensor.select torch.select
SliceDim                  Tensor.slice
Lgamma                    torch.lgamma
STFT                      torch.stft
ISTFT                     torch.istft
Cross                     torch.cross
PairwiseDistance          F.pairwise_distance
Fold                      nn.Fold F.fold
Unfold                    nn.Unfold F.unfold
LPPool1d                  nn.LPPool1d F.lp_pool1d
LPPool2d                  nn.LPPool2d F.lp_pool2d
""")

# Families written once per spatial rank ({} is 1, 2 or 3): nn.Conv2d / F.conv2d -> Conv2d.
_PER_RANK = _rows("""
Conv{}d                   nn.Conv{}d F.conv{}d
ConvTranspose{}d          nn.ConvTranspose{}d F.conv_transpose{}d
MaxPool{}d                nn.MaxPool{}d F.max_pool{}d
AvgPool{}d                nn.AvgPool{}d F.avg_pool{}d
AdaptiveAvgPool{}d        nn.AdaptiveAvgPool{}d F.adaptive_avg_pool{}d
AdaptiveMaxPool{}d        nn.AdaptiveMaxPool{}d F.adaptive_max_pool{}d
ZeroPad{}d                nn.ZeroPad{}d
ConstantPad{}d            nn.ConstantPad{}d
ReflectionPad{}d          nn.ReflectionPad{}d
ReplicationPad{}d         nn.ReplicationPad{}d
CircularPad{}d            nn.CircularPad{}d
""")

# Spellings that carry meaning: stated as typed params (or a node rewrite).
_WITH_MEANING: dict[str, Translation] = {
    "aten::clamp_min": Translation("Clamp", adapt=_bound_input("min")),
    "aten::clamp_max": Translation("Clamp", adapt=_bound_input("max")),
    **{spelling: Translation("Softmax") for spelling in ("nn.Softmax", "F.softmax", "torch.softmax")},
    **{spelling: Translation("Softmax", {"log": True}) for spelling in ("nn.LogSoftmax", "F.log_softmax",
                                                                         "torch.log_softmax")},
    **{spelling: Translation("Softmax", {"negate": True}) for spelling in ("nn.Softmin", "F.softmin")},
    "nn.Softmax2d": Translation("Softmax", {"dim": -3, "input_ranks": [3, 4]}),
    **{f"torch.{name}": Translation("Reduction", {"reduction": name}) for name in ("sum", "mean", "prod")},
    **{f"torch.a{name}": Translation("Extremum", {"reduction": name}) for name in ("max", "min")},
    **{f"torch.{name}": Translation("ExtremumWithIndex", {"reduction": name}) for name in ("max", "min")},
    **{f"torch.arg{name}": Translation("ArgExtremum", {"reduction": name}) for name in ("max", "min")},
    "torch.var": Translation("Variance", {"standard_deviation": False}),
    "torch.std": Translation("Variance", {"standard_deviation": True}),
    "torch.cumsum": Translation("CumulativeScan", {"reduction": "sum"}),
    "torch.cumprod": Translation("CumulativeScan", {"reduction": "prod"}),
    **{f"{prefix}{name}": Translation("AddScaled", {"divide": name == "addcdiv"})
       for prefix in ("aten::", "torch.", "Tensor.") for name in ("addcmul", "addcdiv")},
    "torch.mm": Translation("MatrixProduct", {"rank": 2}),
    "torch.bmm": Translation("MatrixProduct", {"rank": 3}),
    "torch.addmm": Translation("AddMatrixProduct", {"batched": False}),
    "torch.baddbmm": Translation("AddMatrixProduct", {"batched": True},
                                 _renamed_inputs({"batch1": "mat1", "batch2": "mat2"})),
    **{f"nn.{cell}": Translation("Recurrent", {"cell": cell}) for cell in ("RNN", "LSTM", "GRU")},
    **{f"torch.{name}": Translation("Compare", {"comparison": name}) for name in ("eq", "ne", "gt", "ge", "lt", "le")},
    **{f"torch.bitwise_{name}": Translation("Bitwise", {"operation": operation}) for name, operation in (
        ("and", "and"), ("or", "or"), ("xor", "xor"), ("left_shift", "lshift"), ("right_shift", "rshift"))},
    **{f"torch.logical_{name}": Translation("Logical", {"operation": name}) for name in ("and", "or", "xor")},
    **{f"torch.fft.{kind}{suffix}": Translation("FFT", {"transform": kind, "form": form})
       for kind in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
       for suffix, form in (("", "1d"), ("2", "2d"), ("n", "nd"))},
    "Tensor.to": Translation("Cast", adapt=_neutral_dtype),
    **{f"Tensor.{method}": Translation("Cast", {"dtype": dtype}) for method, dtype in (
        ("float", "float32"), ("double", "float64"), ("half", "float16"), ("long", "int64"), ("int", "int32"),
        ("short", "int16"), ("bool", "bool"))},
    "torch.arange": Translation("Arange", adapt=_neutral_dtype),
    "nn.BatchNorm1d": Translation("BatchNorm", adapt=_constant_affine("affine", True)),
    "nn.BatchNorm2d": Translation("BatchNorm", adapt=_constant_affine("affine", True)),
    "nn.BatchNorm3d": Translation("BatchNorm", adapt=_constant_affine("affine", True)),
    "F.batch_norm": Translation("BatchNorm"),
    **{f"nn.InstanceNorm{n}d": Translation("InstanceNorm", {"spatial_dims": n}, _constant_affine("affine", False))
       for n in (1, 2, 3)},
    "F.instance_norm": Translation("InstanceNorm"),
    "nn.GroupNorm": Translation("GroupNorm", adapt=_constant_affine("affine", False)),
    "F.group_norm": Translation("GroupNorm"),
    "nn.LayerNorm": Translation("LayerNorm", adapt=_constant_affine("elementwise_affine", False)),
    "F.layer_norm": Translation("LayerNorm"),
    "nn.RMSNorm": Translation("RMSNorm", adapt=_constant_affine("elementwise_affine", False)),
    "F.rms_norm": Translation("RMSNorm"),
}

PNNX_OPS: dict[str, Translation] = {
    **{spelling: Translation(name) for name in _ACTIVATIONS for spelling in _activation_spellings(name)},
    **{spelling: Translation(canonical) for canonical, spellings in _SAME_MEANING for spelling in spellings},
    **{spelling.format(n): Translation(canonical.format(n))
       for canonical, spellings in _PER_RANK for spelling in spellings for n in (1, 2, 3)},
    **_WITH_MEANING,
}


def translate(node: OpNode) -> OpNode:
    """``node`` with its canonical type and typed params; a type the table lacks comes back as it is.

    The PNNX spelling stays in ``source`` so that error messages still name what the file says.
    """
    translation = PNNX_OPS.get(node.type)
    if translation is None:
        return node
    where = f"{node.source}, " if node.source else ""
    translated = replace(node, type=translation.canonical, params={**node.params, **translation.params},
                         source=f"{where}PNNX {node.type}")
    return translation.adapt(translated) if translation.adapt is not None else translated


def pnnx_spellings() -> dict[str, list[str]]:
    """{canonical type: the PNNX spellings translated to it}, for ``kuiper ops``."""
    spellings: dict[str, list[str]] = {}
    for spelling, translation in PNNX_OPS.items():
        spellings.setdefault(translation.canonical, []).append(spelling)
    return spellings
