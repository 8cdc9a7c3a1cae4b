"""Slicing and indexing: Tensor.slice/select/index, torch.narrow/gather/index_select.

PNNX writes ``x[:, 1:, ::2, -3:]`` as ONE ``Tensor.slice`` with list params
``dims/starts/ends/steps/selects`` over the input's original dims (a select
entry other than INT_MAX picks one index and drops the dim), and a single
``x[:, :, 1:-1]`` with scalar params ``dim/start/end/step``.  INT_MAX means
"to the end".  In graphs with dynamic shapes any of these can instead be an
input (``$end``, ``$ends`` ...) computed by a ``pnnx.Expression`` or
``pnnx.SliceIndexes``.
"""

from __future__ import annotations

import json
import re

from ..errors import InputError, ShapeError
from .base import Op, is_to_the_end, normalize_axis
from .params import Int
from .shape import data_input_index, int_list

INT_MAX = 2147483647


class ArgsOp(Op):
    """An op whose int arguments are params or, by the same name with ``$``, inputs."""

    def int_args(self, key: str, default=None):
        """Remember where ``key`` comes from: an input position, or its param value."""
        index = self.input_index(key)
        if index is not None:
            return ("input", index)
        value = self.param(key, default)
        return ("param", value)

    def resolve(self, source, inputs, what: str):
        kind, value = source
        if kind == "input":
            return int_list(self, inputs[value], f"input ${what}")
        return value


def _slice_bound(value: int) -> int | None:
    return None if is_to_the_end(value) else value


class Slice(ArgsOp):
    types = ("SliceDim",)
    extra_inputs = 0  # tensor inputs besides the data and the $-bound slice arguments

    def setup(self):
        self.data_index = self.data_position()
        if self.has_param("dims"):
            self.dims = self.ints_param("dims")
            count = len(self.dims)
            self.sources = {
                key: self.int_args(key, default)
                for key, default in (
                    ("starts", [0] * count),
                    ("ends", [INT_MAX] * count),
                    ("steps", [1] * count),
                    ("selects", [INT_MAX] * count),
                )
            }
        else:
            self.dims = (self.int_param("dim"),)
            self.sources = {
                "starts": self.int_args("start", 0),
                "ends": self.int_args("end", INT_MAX),
                "steps": self.int_args("step", 1),
                "selects": self.int_args("select", INT_MAX),
            }
        for key, (kind, value) in self.sources.items():
            if kind == "param":
                values = [value] if isinstance(value, int) and not isinstance(value, bool) else value
                if not isinstance(values, list) or len(values) != len(self.dims) or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in values
                ):
                    raise self.error(f"param '{key}' must hold {len(self.dims)} integer(s), found {value!r}")
                self.sources[key] = ("param", tuple(values))
        expected_inputs = 1 + self.extra_inputs + sum(kind == "input" for kind, _ in self.sources.values())
        self.require_inputs(expected_inputs)

    def data_position(self) -> int:
        return data_input_index(self)

    def forward(self, *inputs):
        x = inputs[self.data_index]
        return x[self.index_key(x, inputs)]

    def index_key(self, x, inputs) -> tuple:
        """The basic-indexing key (slices and ints) this op applies to ``x``."""
        values = {}
        for key, source in self.sources.items():
            values[key] = self.resolve(source, inputs, key)
            if len(values[key]) != len(self.dims):
                raise self.error(f"{key} {list(values[key])} do not match dims {list(self.dims)}")
        index = [slice(None)] * x.ndim
        seen = set()
        for dim, start, end, step, select in zip(
            self.dims, values["starts"], values["ends"], values["steps"], values["selects"]
        ):
            axis = normalize_axis(dim, x.ndim, self)
            if axis in seen:
                raise self.error(f"dims {list(self.dims)} name dim {dim} twice")
            seen.add(axis)
            if not is_to_the_end(select):
                index[axis] = checked_index(self, select, x.shape[axis], dim)
            else:
                if step < 1:
                    raise self.error(f"slice step must be positive, found {step}")
                index[axis] = slice(start, _slice_bound(end), step)
        return tuple(index)


def checked_index(op: Op, index: int, size: int, dim: int) -> int:
    if not -size <= index < size:
        raise ShapeError(f"{op.node.describe()}: index {index} is out of range for dim {dim} of size {size}")
    return index


class Select(ArgsOp):
    types = ("Select",)

    def setup(self):
        self.data_index = data_input_index(self)
        self.dim = self.int_param("dim")
        self.index_source = self.int_args("index")
        if self.index_source[0] == "param":
            self.index_source = ("param", (self.int_param("index"),))
        self.require_inputs(2 if self.index_source[0] == "input" else 1)

    def forward(self, *inputs):
        x = inputs[self.data_index]
        (index,) = self.resolve(self.index_source, inputs, "index")
        axis = normalize_axis(self.dim, x.ndim, self)
        key = [slice(None)] * x.ndim
        key[axis] = checked_index(self, index, x.shape[axis], self.dim)
        return x[tuple(key)]


class Narrow(ArgsOp):
    """torch.narrow(dim, start, length); a negative start counts from the end."""

    types = ("Narrow",)

    def setup(self):
        self.data_index = data_input_index(self)
        self.dim = self.int_param("dim")
        self.sources = {}
        for key in ("start", "length"):
            source = self.int_args(key)
            self.sources[key] = source if source[0] == "input" else ("param", (self.int_param(key),))
        self.require_inputs(1 + sum(kind == "input" for kind, _ in self.sources.values()))

    def forward(self, *inputs):
        x = inputs[self.data_index]
        (start,) = self.resolve(self.sources["start"], inputs, "start")
        (length,) = self.resolve(self.sources["length"], inputs, "length")
        axis = normalize_axis(self.dim, x.ndim, self)
        size = x.shape[axis]
        if start < 0:
            start += size
        if not 0 <= start <= size or length < 0 or start + length > size:
            raise ShapeError(
                f"{self.node.describe()}: narrow(start={start}, length={length}) does not fit dim {self.dim} of size {size}"
            )
        key = [slice(None)] * x.ndim
        key[axis] = slice(start, start + length)
        return x[tuple(key)]


def parse_index_expr(op: Op, text: str) -> list:
    """``[None,[2,0,1]]`` -> [None, [2, 0, 1]]: None, ints, bools and nested lists only."""
    if "@" in text:
        raise op.error(f"param 'expr' refers to inputs ({text!r}) but no input is bound to $expr")
    as_json = re.sub(r"\b(None|True|False)\b", lambda m: {"None": "null", "True": "true", "False": "false"}[m.group()], text)
    try:
        value = json.loads(as_json)
    except ValueError:
        raise op.error(f"param 'expr' must be a list such as [None,[2,0,1]], found {text!r}") from None
    if not isinstance(value, list):
        raise op.error(f"param 'expr' must be a list such as [None,[2,0,1]], found {text!r}")
    for item in value:
        flat = item if isinstance(item, list) else [item]
        if not all(v is None or isinstance(v, (bool, int)) for v in flat) or (
            isinstance(item, list) and any(v is None or isinstance(v, list) for v in item)
        ):
            raise op.error(f"param 'expr' has an index kuiper does not understand: {text!r}")
    return value


def index_item(op: Op, item):
    """One item of an index list as NumPy-style indexing takes it: None -> ``:``, a list -> an array."""
    if item is None:
        return slice(None)
    if isinstance(item, list):
        return op.backend.asarray(item)
    if isinstance(item, bool):
        raise op.error("a bare True/False index is not supported")
    if op.backend.is_array(item) or isinstance(item, int):
        return item
    try:
        return int(item)  # a NumPy integer from an expression
    except (TypeError, ValueError):
        raise op.error(f"cannot index with {item!r}") from None


def indexed(xp, x, key: tuple):
    """``x[key]`` for a key of slices, integers and index arrays, as NumPy (and PyTorch) index.

    The standard's indexing takes an index array only beside other integers and index arrays, so a
    key whose one index array (integers, or a boolean mask) stands among whole-axis slices becomes
    ``xp.take`` along that axis; other keys index directly.  An index out of range is an IndexError.
    """
    arrays = [axis for axis, item in enumerate(key) if hasattr(item, "dtype")]
    if len(arrays) != 1 or any(item != slice(None) for axis, item in enumerate(key) if axis != arrays[0]):
        return x[key]
    axis, index = arrays[0], key[arrays[0]]
    if index.ndim != 1:
        return x[key]
    size = x.shape[axis]
    if xp.isdtype(index.dtype, "bool"):
        if index.shape[0] != size:
            raise IndexError(f"a mask of {index.shape[0]} for an axis of {size}")
        index = xp.nonzero(index)[0]
    elif index.shape[0] and bool(xp.any((index < -size) | (index >= size))):
        raise IndexError(f"an index outside [-{size}, {size}) for an axis of {size}")
    else:
        index = xp.where(index < 0, index + size, index)  # (the standard's take wants them non-negative)
    return xp.take(x, index, axis=axis)


class Index(Op):
    """Tensor.index: advanced indexing ``x[None-or-index, ...]`` with PyTorch's (= NumPy's) rules.

    The per-dim indices are the ``expr`` param (a raw string like
    ``[None,None,[True,False,True]]``) or a list bound to ``$expr`` (from a
    ``pnnx.Expression`` like ``[None,@0]`` whose ``@0`` is an index tensor).
    """

    types = ("Index",)

    def setup(self):
        self.data_index = data_input_index(self)
        self.expr_index = self.input_index("expr")
        self.require_inputs(1 if self.expr_index is None else 2)
        if self.expr_index is None:
            text = self.param("expr")
            if not isinstance(text, str):
                raise self.error(f"param 'expr' must be an index list string, found {text!r}")
            self.key = tuple(index_item(self, item) for item in parse_index_expr(self, text))

    def forward(self, *inputs):
        x = inputs[self.data_index]
        if self.expr_index is None:
            key = self.key
        else:
            value = inputs[self.expr_index]
            if not isinstance(value, (list, tuple)):
                value = [value]
            key = tuple(index_item(self, item) for item in value)
        if len(key) > x.ndim:
            raise ShapeError(f"{self.node.describe()}: {len(key)} indices for a tensor of rank {x.ndim}")
        try:
            return indexed(self.xp, x, key)
        except IndexError as exc:
            raise ShapeError(f"{self.node.describe()}: index out of range for shape {tuple(x.shape)}: {exc}") from None


def check_index_range(op: Op, index, size: int, what: str) -> None:
    """PyTorch raises for indices outside [0, size); NumPy would wrap negatives silently."""
    xp = op.xp
    if not xp.isdtype(index.dtype, "integral"):
        raise InputError(f"{op.node.describe()}: {what} must be an integer tensor, found dtype {index.dtype}")
    if index.size and (bool(xp.any(index < 0)) or bool(xp.any(index >= size))):
        raise InputError(f"{op.node.describe()}: {what} holds values outside [0, {size})")


class IndexAlongDim(Op):
    """An op that indexes ``$input`` along ``dim`` with the tensor ``$index``."""

    input_names = ("input", "index")
    params = (Int("dim"),)


class Gather(IndexAlongDim):
    """torch.gather(input, dim, index): out[i][j][k] = input[i][index[i][j][k]][k] (dim=1).

    PyTorch allows ``index`` to be smaller than the input in the other dims, so the
    input is cut down to the index's extent there first.
    """

    types = ("TakeAlongAxis",)

    def forward(self, *inputs):
        x, index = self.ordered(inputs)
        if index.ndim != x.ndim:
            raise ShapeError(f"{self.node.describe()}: index rank {index.ndim} differs from input rank {x.ndim}")
        axis = normalize_axis(self.dim, x.ndim, self)
        key = []
        for d, (want, have) in enumerate(zip(index.shape, x.shape)):
            if d != axis and want > have:
                raise ShapeError(
                    f"{self.node.describe()}: index shape {tuple(index.shape)} exceeds input shape {tuple(x.shape)} in dim {d}"
                )
            key.append(slice(None) if d == axis else slice(0, want))
        check_index_range(self, index, x.shape[axis], "index")
        return self.xp.take_along_axis(x[tuple(key)], index, axis=axis)


class IndexSelect(IndexAlongDim):
    types = ("IndexSelect",)

    def forward(self, *inputs):
        x, index = self.ordered(inputs)
        if index.ndim > 1:
            raise ShapeError(f"{self.node.describe()}: index must be 0-d or 1-d, found shape {tuple(index.shape)}")
        axis = normalize_axis(self.dim, max(x.ndim, 1), self)
        check_index_range(self, index, x.shape[axis] if x.ndim else 1, "index")
        return self.xp.take(x, self.xp.reshape(index, (-1,)), axis=axis)


OPS = [Slice, Select, Narrow, Index, Gather, IndexSelect]
