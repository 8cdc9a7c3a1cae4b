"""What the pooling ops share: reading and checking the window params, and PyTorch's output-size rule."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op

MAX_WINDOW = 1 << 16  # per axis; far beyond any real pooling window


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool,
                     pad_end: int | None = None) -> int:
    """PyTorch's pooling output length, including its ceil_mode rule; ``pad`` before the input and
    ``pad_end`` (when it differs) after it."""
    span = dilation * (kernel - 1) + 1
    numerator = size + pad + (pad if pad_end is None else pad_end) - span
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    # With ceil_mode the last window must start inside the input or the left padding.
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def spatial_sizes(op: Op, x, spatial: int) -> tuple[int, ...]:
    """The last ``spatial`` sizes of an (N, C, *spatial) or (C, *spatial) input; else a ShapeError."""
    if not op.backend.is_array(x) or x.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(f"{op.node.describe()}: expected a rank-{spatial + 1} or rank-{spatial + 2} input, "
                         f"found {getattr(x, 'shape', type(x).__name__)}")
    return tuple(x.shape[-spatial:])


def check_window(op: Op, kernel, stride, dilation) -> None:
    """Positive window params, and no larger than MAX_WINDOW: pooling loops over kernel taps in Python."""
    for key, values in (("kernel_size", kernel), ("stride", stride), ("dilation", dilation)):
        if any(not 1 <= v <= MAX_WINDOW for v in values):
            raise op.error(f"param '{key}' must be between 1 and {MAX_WINDOW}, found {values}")


def read_window(op: Op, spatial: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """kernel_size, stride (PyTorch: defaults to the kernel) and padding of a pooling op."""
    kernel = op.ints_param("kernel_size", spatial)
    stride = op.param("stride", None)
    stride = kernel if stride in (None, []) else op.ints_param("stride", spatial)
    return kernel, stride, op.ints_param("padding", spatial, default=0)


def read_return_indices(op: Op) -> bool:
    """``return_indices``: the indices come as a second output operand, or, when pnnx writes
    one output followed by prim::TupleUnpack (nn.AdaptiveMaxPool1d), inside a (values, indices) tuple."""
    return_indices = op.bool_param("return_indices", default=False)
    outputs = len(op.node.outputs)
    if outputs not in ((1, 2) if return_indices else (1,)):
        raise op.error(f"return_indices={return_indices} gives {'1 or 2' if return_indices else '1'} "
                       f"output(s), the file declares {outputs}")
    return return_indices
