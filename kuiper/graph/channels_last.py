"""Which ops write their output channels-last, for readers that move the channels last.

A convolution's output is (N, C, *spatial), row-major.  Many models then move the channels last:
ConvNeXt's and EdgeNeXt's blocks permute it to (N, H, W, C) for a LayerNorm and Linear layers, PVT-v2's
Mix-FFN flattens and transposes it to (N, H*W, C), YOLOv5's detect head reshapes it to (N, 3, 85, H, W) and
permutes that to (N, 3, H, W, 85).  The permute is a view whose last axis strides across whole maps, so
the next reader copies or gathers it (a LayerNorm's rows, a split's pieces, a concat).

An op that can hand over its output as a view of an (N, *spatial, C) array (``Op.writes_channels_last``: a
oneDNN convolution, whose plain output is a reorder out of its own layout anyway) is told to
(``output_layout = CHANNELS_LAST``) when its output is read only through a chain of rearranging ops
(``Op.rearranges``, each the one reader of the one before) whose result then has its last axis in unit
strides where, row-major, it would not.  The values are the same array's; only where they lie changes,
so the permute costs nothing and its readers read rows.

The test runs the chain's own ops on two empty arrays of the output's declared shape (unknown dims taken
as 1), one row-major and one channels-last, and reads the strides of what comes out: nothing is assumed
about what a rearranging op does.  Like native_layouts.py this runs on the built steps, after the ops
chose their kernels, and leaves model outputs alone.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..errors import KuiperError
from ..ops.base import CHANNELS_LAST

# Declared outputs of more elements than this are not probed (an empty array costs no memory until written,
# but an op that copies would write it).
MAX_PROBE_ELEMENTS = 1 << 26


def write_channels_last(steps, keep: set[str], operands: dict) -> None:
    """Set ``op.output_layout = CHANNELS_LAST`` on each step whose op can write channels-last and whose output's
    readers then read rows (see the module's doc)."""
    readers: dict[str, list] = defaultdict(list)
    for step in steps:
        for operand in step.node.inputs:
            readers[operand].append(step)
    for step in steps:
        op = step.op
        if op.output_layout is not None or len(step.node.outputs) != 1 or not op.writes_channels_last():
            continue
        operand = step.node.outputs[0]
        if operand in keep:
            continue
        chain = _rearranging_chain(operand, readers)
        shape = _probe_shape(operands.get(operand))
        if chain and shape is not None and _reads_rows_only_channels_last(chain, shape):
            op.output_layout = CHANNELS_LAST


def _rearranging_chain(operand: str, readers) -> list:
    """The ops that read ``operand`` one after another, each the only reader of the one before and each
    rearranging its one input into its one output; [] where its reader is not such an op."""
    chain = []
    while len(readers[operand]) == 1:
        step = readers[operand][0]
        if not step.op.rearranges or len(step.node.inputs) != 1 or len(step.node.outputs) != 1:
            break
        chain.append(step.op)
        operand = step.node.outputs[0]
    return chain


def _probe_shape(info) -> tuple[int, ...] | None:
    """The declared shape with unknown dims as 1, where it is of rank 3 to 5 (N, C and 1-3 spatial dims)."""
    shape = getattr(info, "shape", None)
    if shape is None or not 3 <= len(shape) <= 5:
        return None
    shape = tuple(1 if size is None else int(size) for size in shape)
    if min(shape) < 1 or int(np.prod(shape, dtype=np.int64)) > MAX_PROBE_ELEMENTS:
        return None
    return shape


def _reads_rows_only_channels_last(chain, shape) -> bool:
    """Whether the chain's result is a view with its last axis in unit strides when its input is written
    channels-last, and not when it is row-major."""
    rank = len(shape)
    order = (0, *range(2, rank), 1)
    owner = np.empty(tuple(shape[axis] for axis in order), np.float32)
    channels_last = owner.transpose(tuple(order.index(axis) for axis in range(rank)))
    row_major = np.empty(shape, np.float32)
    try:
        return _reads_rows(_through(chain, channels_last), owner) and not _reads_rows(_through(chain, row_major),
                                                                                       row_major)
    except (KuiperError, ValueError, TypeError):
        return False  # a declared shape the chain refuses (a batch taken as 1 that a reshape fixes otherwise)


def _through(chain, value):
    for op in chain:
        value = op.forward(value)
    return value


def _reads_rows(result, owner) -> bool:
    """A view of ``owner`` whose last axis, longer than 1, is in unit strides."""
    return (isinstance(result, np.ndarray) and result.base is owner and result.ndim >= 1 and result.shape[-1] > 1
            and result.strides[-1] == result.itemsize)
