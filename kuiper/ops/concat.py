"""Joining and splitting: torch.cat/stack and torch.split/chunk/tensor_split/unbind.

The splitting ops have one output operand per piece; PNNX writes as many
outputs as PyTorch produced, so each op checks that its piece count matches.
"""

from __future__ import annotations

import operator

from ..errors import ShapeError
from .base import Op, normalize_axis, prod
from .params import Int, Ints
from .shape import resolve_shape
from .specialize import same_shape


class _Joining(Op):
    """Tensors joined along ``dim``: at least one input."""

    params = (Int("dim", default=0),)

    def setup(self):
        if not self.node.inputs:
            raise self.error("expects at least one input")


class Cat(_Joining):
    """torch.cat.  Like PyTorch, a 1-D tensor of shape (0,) is skipped whatever the others'
    rank (it still takes part in dtype promotion): a Hugging Face decoder's empty KV cache
    starts as such a tensor and is joined with (batch, heads, seq, dim) keys."""

    # Also the canonical Concat: skipping (0,) operands changes nothing where all have one rank (HLO).
    types = ("Concat",)

    def forward(self, *tensors):
        return join(self, tensors, self.dim)


def join(op: Op, tensors, dim: int):
    """torch.cat of ``tensors`` along ``dim``, with its errors named after ``op`` (Cat's math)."""
    xp = op.xp
    joined = [t for t in tensors if tuple(t.shape) != (0,)]
    if not joined:  # only empty 1-D tensors: PyTorch accepts any dim and gives (0,)
        return xp.concat(list(tensors), axis=0)
    first = joined[0]
    axis = normalize_axis(dim, first.ndim, op)
    for t in joined[1:]:
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ShapeError(f"{op.node.describe()}: cannot concatenate shapes {shapes} along dim {dim}")
    result = xp.concat(joined, axis=axis)
    dtype = xp.result_type(*tensors)
    return result if result.dtype == dtype else result.astype(dtype)


class ConcatNested(Op):
    """Concat along ``dim`` of operands each of which is itself a concat of inputs, reshaped.

    Operand i joins the next ``pieces[i]`` inputs along ``inner_dims[i]`` and, where
    ``ranks[i]`` is not -1, reshapes the result to the next ``ranks[i]`` values of ``shapes``
    (Reshape's rule: one -1 is inferred).  The graph writes ``concat(reshape(concat(...)), ...)``
    so (kuiper/graph/nested_joins.py: YOLO's detect head joins xy, wh and the class scores per
    level, then the levels): as one op, a kernel can write every piece straight into the one
    output instead of making each level's join and copying it again.  Here the math is exactly
    the ops it replaces, one after the other.
    """

    types = ("ConcatNested",)
    params = (Int("dim", default=0), Ints("pieces", low=1), Ints("inner_dims", length="pieces"),
              Ints("ranks", length="pieces", low=-1), Ints("shapes", default=()))

    def setup(self):
        if sum(self.pieces) != len(self.node.inputs):
            raise self.error(f"param 'pieces' {list(self.pieces)} adds up to {sum(self.pieces)} inputs, "
                             f"the op has {len(self.node.inputs)}")
        if sum(max(rank, 0) for rank in self.ranks) != len(self.shapes):
            raise self.error(f"param 'shapes' holds {len(self.shapes)} values, param 'ranks' "
                             f"{list(self.ranks)} asks for {sum(max(rank, 0) for rank in self.ranks)}")
        self.groups = []  # (first input, input count, inner dim, reshape target or None) per operand
        first, cursor = 0, 0
        for count, inner, rank in zip(self.pieces, self.inner_dims, self.ranks):
            target = None if rank < 0 else tuple(self.shapes[cursor:cursor + rank])
            cursor += max(rank, 0)
            self.groups.append((first, count, inner, target))
            first += count

    def operand(self, tensors, group):
        """Operand ``group`` of the outer join, made as the replaced ops made it."""
        first, count, inner, target = group
        if count == 1 and target is None:  # an operand the outer join takes as it is
            return tensors[first]
        joined = join(self, tensors[first:first + count], inner)
        if target is None:
            return joined
        shape = resolve_shape(self, target, prod(joined.shape), f"shape {tuple(joined.shape)}")
        return self.xp.reshape(joined, shape)

    def forward(self, *tensors):
        return join(self, [self.operand(tensors, group) for group in self.groups], self.dim)


class Stack(_Joining):
    types = ("Stack",)

    def forward(self, *tensors):
        first = tensors[0]
        if any(tuple(t.shape) != tuple(first.shape) for t in tensors):
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ShapeError(f"{self.node.describe()}: cannot stack different shapes {shapes}")
        axis = normalize_axis(self.dim, first.ndim + 1, self)
        return self.xp.stack(list(tensors), axis=axis)


class SplitOp(Op):
    """Base for ops that cut one input into pieces along ``dim``; subclasses give the piece bounds."""

    arity = 1
    params = (Int("dim", default=0),)

    def bounds(self, size: int) -> list[tuple[int, int]]:
        """(start, stop) of each piece along a dim of ``size``."""
        raise NotImplementedError

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim, self)
        pieces = self.bounds(x.shape[axis])
        if len(pieces) != len(self.node.outputs):
            raise ShapeError(
                f"{self.node.describe()}: splitting dim {self.dim} of size {x.shape[axis]} gives {len(pieces)} "
                f"piece(s), the graph expects {len(self.node.outputs)}"
            )
        key = [slice(None)] * x.ndim
        outputs = []
        for start, stop in pieces:
            key[axis] = slice(start, stop)
            outputs.append(x[tuple(key)])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def specialized(self, inputs):
        """The pieces' indexes worked out once, while the input keeps this call's shape (an LSTM's four
        gates out of one product, kuiper/graph/slice_groups.py)."""
        x = inputs[0]
        if len(self.node.outputs) < 2 or not hasattr(x, "ndim") or x.ndim == 0:
            return None
        axis = normalize_axis(self.dim, x.ndim, self)
        pieces = self.bounds(x.shape[axis])
        if len(pieces) != len(self.node.outputs):
            return None
        keys = tuple(tuple(slice(start, stop) if d == axis else slice(None) for d in range(x.ndim))
                     for start, stop in pieces)
        # itemgetter takes the pieces in one C call, as a tuple (two pieces or more): 0.35 us for an LSTM's
        # four gates, where a comprehension cost 0.63.
        return same_shape(x, operator.itemgetter(*keys), self.forward)


class Split(SplitOp):
    """torch.split: pieces of ``split_size_or_sections`` (last one shorter), or the listed sizes (0 allowed)."""

    types = ("Split",)

    def setup(self):
        value = self.param("split_size_or_sections")
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                raise self.error(f"param 'split_size_or_sections' must be non-negative, found {value}")
            self.size, self.sections = value, None
        else:
            self.sections = self.ints_param("split_size_or_sections")
            if any(s < 0 for s in self.sections):
                raise self.error(f"param 'split_size_or_sections' must be non-negative, found {list(self.sections)}")
            self.size = None

    def bounds(self, size):
        if self.sections is None:
            if self.size == 0:
                if size:
                    raise ShapeError(f"{self.node.describe()}: split size 0 on a non-empty dim of size {size}")
                return [(0, 0)]
            return [(start, min(start + self.size, size)) for start in range(0, size, self.size)] or [(0, 0)]
        if sum(self.sections) != size:
            raise ShapeError(
                f"{self.node.describe()}: split sizes {list(self.sections)} do not add up to dim {self.dim} of size {size}"
            )
        edges = [0]
        for s in self.sections:
            edges.append(edges[-1] + s)
        return list(zip(edges[:-1], edges[1:]))


class Chunk(SplitOp):
    """torch.chunk: pieces of ceil(size/chunks); there may be fewer than ``chunks`` of them."""

    types = ("Chunk",)
    params = (*SplitOp.params, Int("chunks", low=1))

    def bounds(self, size):
        step = -(-size // self.chunks)
        if step == 0:  # an empty dim: PyTorch gives `chunks` empty pieces
            if self.chunks != len(self.node.outputs):  # checked before building a list of `chunks` pieces
                raise ShapeError(f"{self.node.describe()}: chunks={self.chunks} of an empty dim gives {self.chunks} "
                                 f"pieces, the graph expects {len(self.node.outputs)}")
            return [(0, 0)] * self.chunks
        return [(start, min(start + step, size)) for start in range(0, size, step)]


class TensorSplit(SplitOp):
    """torch.tensor_split: ``sections`` near-equal pieces (the first size % n one longer), or cut at ``indices``."""

    types = ("TensorSplit",)

    def setup(self):
        if self.has_param("indices"):
            self.indices, self.sections = self.ints_param("indices"), None
        else:
            self.sections, self.indices = self.int_param("sections"), None
            if self.sections < 1:
                raise self.error(f"param 'sections' must be positive, found {self.sections}")
            # tensor_split always makes exactly `sections` pieces: check before looping over them.
            if self.sections != len(self.node.outputs):
                raise self.error(f"sections={self.sections} makes {self.sections} pieces, the file declares "
                                 f"{len(self.node.outputs)} output(s)")

    def bounds(self, size):
        if self.indices is None:
            base, extra = divmod(size, self.sections)
            edges = [0]
            for i in range(self.sections):
                edges.append(edges[-1] + base + (1 if i < extra else 0))
            return list(zip(edges[:-1], edges[1:]))
        # Like x[:i0], x[i0:i1], ..., x[ik:] with Python slice rules (negative wrap, clamping).
        starts = [0, *self.indices]
        stops = [*self.indices, None]
        pieces = []
        for start, stop in zip(starts, stops):
            first, last, _ = slice(start, stop).indices(size)
            pieces.append((first, max(first, last)))
        return pieces


class Unbind(Op):
    types = ("Unbind",)
    arity = 1
    params = (Int("dim", default=0),)

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim, self)
        if x.shape[axis] != len(self.node.outputs):
            raise ShapeError(
                f"{self.node.describe()}: dim {self.dim} has size {x.shape[axis]}, the graph expects "
                f"{len(self.node.outputs)} outputs"
            )
        key = [slice(None)] * x.ndim
        outputs = []
        for i in range(x.shape[axis]):
            key[axis] = i
            outputs.append(x[tuple(key)])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


OPS = [Cat, ConcatNested, Stack, Split, Chunk, TensorSplit, Unbind]
