"""Graph plumbing: tuples and lists of values, dtype casts, embedding lookups.

* ``prim::TupleConstruct`` gathers a model's several outputs into the one
  operand that ``pnnx.Output`` reads.  Nested tuples are flattened depth-first,
  which is the order PNNX and PyTorch number a model's outputs in.
* ``prim::ListConstruct`` / ``prim::TupleUnpack`` / ``prim::ListUnpack`` and
  ``pnnx.SliceIndexes`` (the ``[start, @0, ...]`` lists dynamic slices use)
  build and split Python sequences of values.
* ``Tensor.to`` / ``Tensor.type_as`` cast with PyTorch's rules (float to int
  truncates toward zero; anything to bool is "non-zero").
* ``nn.Embedding`` / ``F.embedding`` look rows up by int64 index.
"""

from __future__ import annotations

from ..errors import InputError
from ..ir.dtypes import array_dtype
from .base import Op
from .shape import LikeOther, data_input_index, int_list
from .slicing import check_index_range

# The dtypes a cast may name (array-API names; the PNNX frontend translates torch.float & co).
CAST_DTYPES = ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def _flatten(values) -> list:
    out = []
    for value in values:
        if isinstance(value, tuple):
            out.extend(_flatten(value))
        else:
            out.append(value)
    return out


class TupleConstruct(Op):
    types = ("MakeTuple",)

    def forward(self, *values):
        return tuple(_flatten(values))


class ListConstruct(Op):
    types = ("MakeList",)

    def forward(self, *values):
        return list(values)


class Unpack(Op):
    """prim::TupleUnpack / prim::ListUnpack: one sequence in, one output per element."""

    types = ("Unpack",)
    arity = 1

    def forward(self, values):
        if not isinstance(values, (tuple, list)):
            if not self.backend.is_array(values) or values.ndim == 0:
                raise self.error(f"expects a tuple or list input, found {type(values).__name__}")
            values = [values[i] for i in range(values.shape[0])]  # unpacking a tensor iterates dim 0
        if len(values) != len(self.node.outputs):
            raise self.error(f"unpacks {len(values)} value(s) into {len(self.node.outputs)} outputs")
        return values[0] if len(values) == 1 else tuple(values)


class SliceIndexes(Op):
    """pnnx.SliceIndexes ``indexes=(1,@0,@1)``: a list of ints, ``@N`` taken from input N."""

    types = ("SliceIndexes",)

    def setup(self):
        indexes = self.param("indexes")
        if not isinstance(indexes, list):
            indexes = [indexes]
        self.items = []
        for item in indexes:
            if isinstance(item, str) and item.startswith("@") and item[1:].isdigit():
                position = int(item[1:])
                if position >= len(self.node.inputs):
                    raise self.error(f"param 'indexes' refers to {item} but the op has {len(self.node.inputs)} input(s)")
                self.items.append(("input", position))
            elif isinstance(item, int) and not isinstance(item, bool):
                self.items.append(("value", item))
            else:
                raise self.error(f"param 'indexes' must hold integers and @N references, found {indexes!r}")

    def forward(self, *inputs):
        result = []
        for kind, value in self.items:
            if kind == "value":
                result.append(value)
            else:
                (number,) = int_list(self, inputs[value], f"input @{value}")
                result.append(number)
        return result


class To(Op):
    """A cast to ``dtype`` with PyTorch's rules; device, copy and memory-format flags do not change values."""

    types = ("Cast",)
    arity = 1

    def setup(self):
        self.dtype = array_dtype(self.xp, self.choice_param("dtype", CAST_DTYPES))

    def forward(self, x):
        return cast(self, x, self.dtype)


def cast(op: Op, x, dtype):
    xp = op.xp
    if not op.backend.is_array(x):
        x = op.backend.asarray(x)
    if x.dtype == dtype:
        return x
    if xp.isdtype(dtype, "bool"):
        return x != 0
    if xp.isdtype(dtype, "integral") and xp.isdtype(x.dtype, "real floating"):
        x = xp.trunc(x)  # PyTorch truncates toward zero
    return xp.astype(x, dtype)


class TypeAs(LikeOther):
    types = ("TypeAs",)

    def forward(self, *inputs):
        x, other = self.ordered(inputs)
        return cast(self, x, other.dtype)


def lookup_rows(op: Op, weight, indices):
    """weight[indices] for any index shape: (*indices.shape, embedding_dim)."""
    xp = op.xp
    if not op.backend.is_array(indices) or not xp.isdtype(indices.dtype, "integral"):
        found = getattr(indices, "dtype", type(indices).__name__)
        raise InputError(f"{op.node.describe()}: expects integer indices, found {found}")
    check_index_range(op, indices, weight.shape[0], "indices")
    rows = xp.take(weight, xp.reshape(indices, (-1,)), axis=0)
    return xp.reshape(rows, tuple(indices.shape) + (weight.shape[1],))


def check_embedding_params(op: Op) -> None:
    """max_norm renormalises rows in place at lookup time; kuiper does not implement it."""
    if op.param("max_norm", None) is not None:
        raise op.unsupported("max_norm", op.param("max_norm"), [None])


class Embedding(Op):
    types = ("Embedding",)
    arity = 1

    def setup(self):
        check_embedding_params(self)
        self.table = self.weight("weight")
        if self.table.ndim != 2:
            raise self.error(f"weight must have rank 2, found shape {tuple(self.table.shape)}")

    def forward(self, indices):
        return lookup_rows(self, self.table, indices)


class FunctionalEmbedding(Op):
    """F.embedding(input, weight): the table is an input (often a pnnx.Attribute)."""

    types = ("EmbeddingInputs",)
    arity = 2

    def setup(self):
        check_embedding_params(self)
        self.data_index = data_input_index(self)
        self.weight_index = self.input_index("weight", 1 - self.data_index)

    def forward(self, *inputs):
        weight = inputs[self.weight_index]
        if weight.ndim != 2:
            raise self.error(f"weight must have rank 2, found shape {tuple(weight.shape)}")
        return lookup_rows(self, weight, inputs[self.data_index])


OPS = [TupleConstruct, ListConstruct, Unpack, SliceIndexes, To, TypeAs, Embedding, FunctionalEmbedding]
