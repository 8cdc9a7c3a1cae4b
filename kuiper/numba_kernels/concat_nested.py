"""A concat of reshaped concats written piece by piece into its one output (kuiper/graph/nested_joins.py).

The reference ``ConcatNested`` makes each inner join, reshapes it and joins the results again;
here the output is made once and each inner join's region of it is viewed in the inner join's
shape (a reshape of a slice along the outer dim, without a copy), so every piece is copied once,
straight to where it ends up.  YOLOv5's detect head at batch 8 (640x640): no 22 MB of level joins
and no second pass over the 68 MB output.

The values are the reference's bit for bit: every element is copied, none computed.  Anything
but NumPy arrays of one dtype whose shapes join cleanly (an empty 1-D piece, which Cat skips, a
mismatch, which the reference names) goes to the reference; a region that cannot be viewed in
its inner shape gets the reference's inner join copied into it.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from ..limits import check_size
from ..ops.base import prod
from ..ops.concat import ConcatNested
from ..ops.shape import resolve_shape


class ConcatNestedInPlace(ConcatNested):
    """ConcatNested with each piece copied once, into its place in the output."""

    kernel_note = "each piece copied once into its place in the output"

    def forward(self, *tensors):
        layout = self._layout(tensors)
        if layout is None:
            return super().forward(*tensors)
        out_shape, axis, regions = layout
        check_size(out_shape, tensors[0].dtype.itemsize, self.node.describe())
        out = output_array(out_shape, dtype=tensors[0].dtype)
        lead = (slice(None),) * axis
        start = 0
        for size, inner_shape, inner_axis, parts in regions:
            region = out[lead + (slice(start, start + size),)]
            start += size
            target = _view(region, inner_shape)
            if target is None:  # the region is not a view of this shape: join, then copy once more
                region[...] = np.reshape(np.concatenate(parts, axis=inner_axis), region.shape)
                continue
            cut = (slice(None),) * inner_axis
            offset = 0
            for part in parts:
                width = part.shape[inner_axis]
                np.copyto(target[cut + (slice(offset, offset + width),)], part)
                offset += width
        return out

    def _layout(self, tensors):
        """(output shape, outer axis, [(size along it, inner shape, inner axis, pieces)] per operand), or
        None where the reference should run (it raises the errors)."""
        first = tensors[0] if tensors else None
        if not all(isinstance(t, np.ndarray) and t.dtype == first.dtype and t.ndim for t in tensors):
            return None
        regions, operand_shapes = [], []
        for start, count, inner, target in self.groups:
            parts = tensors[start:start + count]
            rank = parts[0].ndim
            if not -rank <= inner < rank:
                return None
            inner_axis = inner % rank
            inner_shape = list(parts[0].shape)
            for part in parts[1:]:
                if part.ndim != rank or any(a != b for d, (a, b) in enumerate(zip(part.shape, inner_shape))
                                            if d != inner_axis):
                    return None
                inner_shape[inner_axis] += part.shape[inner_axis]
            shape = tuple(inner_shape)
            if target is not None:
                shape = resolve_shape(self, target, prod(inner_shape), f"shape {tuple(inner_shape)}")
            operand_shapes.append(shape)
            regions.append([shape, tuple(inner_shape), inner_axis, parts])
        rank = len(operand_shapes[0])
        if not rank or not -rank <= self.dim < rank:
            return None
        axis = self.dim % rank
        out_shape = list(operand_shapes[0])
        for shape in operand_shapes[1:]:
            if len(shape) != rank or any(a != b for d, (a, b) in enumerate(zip(shape, out_shape)) if d != axis):
                return None
            out_shape[axis] += shape[axis]
        for region in regions:
            region[0] = region[0][axis]
        return tuple(out_shape), axis, regions


def _view(region: np.ndarray, shape) -> np.ndarray | None:
    """``region`` viewed in ``shape`` without a copy, or None where no view has that shape."""
    try:
        return region.reshape(shape, copy=False)
    except ValueError:
        return None
    except TypeError:  # NumPy before 2.1 has no copy argument: a copy lies elsewhere in memory, a view does not
        view = region.reshape(shape)
        return view if np.may_share_memory(view, region) else None


KERNELS = [ConcatNestedInPlace]
