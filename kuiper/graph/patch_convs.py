"""A convolution whose windows tile its input (stride = kernel, no padding) is a matrix product of patches.

A ViT's patch embedding (``nn.Conv(192, (16, 16), 16)``) reads each input element once: its windows
do not overlap.  Cut into its windows, the input is a (patches, kernel area x channels) matrix, and
the conv is that matrix times the weight read as (kernel area x channels, out channels), plus the
bias: one GEMM, the product ops' fast path, instead of a convolution kernel built for overlapping
windows (ViT-Ti's 16x16 patches of 224x224x3, weight and bias passed per call as JAX passes them:
the conv 0.86 ms, the patches' copy and the GEMM 0.55).

``conv(x, w[, b])`` with x (N, C, H, W) and w (O, C, kh, kw) becomes::

    patches = reshape(transpose(reshape(x, (N, C, H/kh, kh, W/kw, kw)), (0, 2, 4, 3, 5, 1)), (N*H/kh*W/kw, kh*kw*C))
    matrix  = transpose(reshape(transpose(w, (0, 2, 3, 1)), (O, kh*kw*C)), (1, 0))
    out     = transpose(reshape(AddMatrixProduct(b, patches, matrix), (N, H/kh, W/kw, O)), (0, 3, 1, 2))

(MatMul without a bias).  The patches' columns run (kh, kw, C), as the weight of a channels-last
program lies (JAX's HWIO kernel: its transposes then join into one that reshapes without a copy),
and the transposes around JAX's NHWC conv join with the ones written here (transposes.py).  Only
2-D convs with one group, no dilation, no padding, a kernel of more than one element, spatial dims
the windows divide, declared float32 shapes, and a weight that arrives as an input (a constant weight
is prepared once by the conv kernels); anything else stays a Conv.  Reads only the op set.
"""

from __future__ import annotations

from ..model_ir import OperandInfo, OpNode

CONV, TRANSPOSE, RESHAPE = "Conv", "Transpose", "Reshape"
MATMUL, ADD_MATMUL = "MatMul", "AddMatrixProduct"
FLOAT32 = "float32"


def convs_as_patch_products(order: list[OpNode], operands: dict[str, OperandInfo]) -> list[OpNode]:
    """The op order with each conv whose windows tile its input written as a product of patches."""
    names = {operand for node in order for operand in (*node.inputs, *node.outputs)}
    new_order: list[OpNode] = []
    for node in order:
        sizes = _tiling(node, operands)
        new_order.extend([node] if sizes is None else _patch_product(node, sizes, names))
    return new_order


def _shape(operands: dict[str, OperandInfo], operand: str) -> tuple | None:
    info = operands.get(operand)
    if info is None or info.dtype != FLOAT32 or info.shape is None or not all(isinstance(d, int) for d in info.shape):
        return None
    return tuple(info.shape)


def _tiling(node: OpNode, operands: dict[str, OperandInfo]) -> tuple | None:
    """(N, C, H, W, O, kh, kw) where ``node`` is a conv this pass rewrites, else None."""
    params = node.params
    if (node.type != CONV or len(node.inputs) not in (2, 3) or len(node.outputs) != 1 or any(node.input_keys)
            or node.attrs or "epilogue" in params or params.get("spatial_dims") != 2 or params.get("groups", 1) != 1
            or list(params.get("dilation", [1, 1])) != [1, 1] or params.get("padding", 0) not in (0, [0, 0])
            or params.get("padding_mode", "zeros") != "zeros"
            or any(list(pair) != [0, 0] for pair in params.get("pads", [[0, 0], [0, 0]]))):
        return None
    x, w, out = _shape(operands, node.inputs[0]), _shape(operands, node.inputs[1]), _shape(operands, node.outputs[0])
    if x is None or w is None or out is None or len(x) != 4 or len(w) != 4:
        return None
    n, c, h, width = x
    o, wc, kh, kw = w
    if wc != c or list(params.get("stride", [])) != [kh, kw] or kh * kw < 2 or h % kh or width % kw:
        return None
    if out != (n, o, h // kh, width // kw):
        return None
    if len(node.inputs) == 3 and _shape(operands, node.inputs[2]) != (o,):
        return None
    return n, c, h, width, o, kh, kw


def _patch_product(conv: OpNode, sizes: tuple, names: set[str]) -> list[OpNode]:
    n, c, h, width, o, kh, kw = sizes
    rows, columns = n * (h // kh) * (width // kw), kh * kw * c
    x, w = conv.inputs[0], conv.inputs[1]

    def fresh(suffix: str) -> str:
        name = f"{conv.name}/{suffix}"
        while name in names:
            name += "'"
        names.add(name)
        return name

    def op(kind: str, inputs: list[str], suffix: str, params: dict | None = None, output: str | None = None) -> OpNode:
        return OpNode(type=kind, name=fresh(suffix), inputs=inputs, outputs=[output or fresh(f"{suffix}_out")],
                      params=params or {}, input_keys=[None] * len(inputs), source=conv.source)

    windows = op(RESHAPE, [x], "windows", {"shape": [n, c, h // kh, kh, width // kw, kw]})
    gathered = op(TRANSPOSE, windows.outputs, "windows_moved", {"dims": [0, 2, 4, 3, 5, 1]})
    patches = op(RESHAPE, gathered.outputs, "patches", {"shape": [rows, columns]})
    channels_last = op(TRANSPOSE, [w], "kernel_moved", {"dims": [0, 2, 3, 1]})
    flat = op(RESHAPE, channels_last.outputs, "kernel_rows", {"shape": [o, columns]})
    matrix = op(TRANSPOSE, flat.outputs, "kernel_matrix", {"dims": [1, 0]})
    if len(conv.inputs) == 3:
        product = op(ADD_MATMUL, [conv.inputs[2], *patches.outputs, *matrix.outputs], "product")
    else:
        product = op(MATMUL, [*patches.outputs, *matrix.outputs], "product")
    grid = op(RESHAPE, product.outputs, "grid", {"shape": [n, h // kh, width // kw, o]})
    back = op(TRANSPOSE, grid.outputs, "channels_first", {"dims": [0, 3, 1, 2]}, output=conv.outputs[0])
    return [windows, gathered, patches, channels_last, flat, matrix, product, grid, back]
