"""In-place tensor edits as pnnx writes them: fill, masked_fill, index_put, slice_copy.

PyTorch code such as ``y = x.clone(); y[:, 1:3] = z`` reaches pnnx as a chain of
functional ops: ``Tensor.clone`` then ``Tensor.slice_copy`` ($self the tensor written
into, $src the values, the slice as Tensor.slice spells it), or ``Tensor.index_put``
($indices a list from a pnnx.Expression such as ``[None,@0]``; a bool mask or index
tensors).  Here every edit writes into a fresh copy, so no input ever changes:
arrays flowing through a kuiper graph are values.  A clone is therefore the input
itself: the PNNX frontend translates it to ``Identity``.

Values (``value=``/``values=``) are numbers in the file or 0-d tensors bound to
``$value``/``$values``; they are converted to the edited tensor's dtype, as PyTorch does.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op
from .slicing import Slice, index_item, indexed


class ValueOp(Op):
    """An op whose scalar ``key`` is a number param or an input bound to ``$key``."""

    def read_value(self, key: str):
        self.value_at = self.input_index(key)
        if self.value_at is None:
            value = self.param(key, None)
            if isinstance(value, list) and len(value) == 1:
                value = value[0]
            if not isinstance(value, (bool, int, float)):
                raise self.error(f"param '{key}' must be a number or an input bound to ${key}, found {value!r}")
            self.value = value
        return 0 if self.value_at is None else 1

    def value_for(self, inputs, dtype):
        value = self.value if self.value_at is None else inputs[self.value_at]
        return self.xp.astype(self.xp.asarray(value), dtype)


class Fill(ValueOp):
    """Tensor.fill (x.fill_(v)): a tensor of x's shape and dtype holding v."""

    types = ("Fill",)

    def setup(self):
        self.input_at = self.input_index("input", 0)
        self.require_inputs(1 + self.read_value("value"))

    def forward(self, *inputs):
        x, xp = inputs[self.input_at], self.xp
        # full_like takes a Python scalar only (the standard); the value may be a 0-d array
        return xp.asarray(xp.broadcast_to(self.value_for(inputs, x.dtype), tuple(x.shape)), copy=True)


class MaskedFill(ValueOp):
    types = ("MaskedFill",)

    def setup(self):
        self.input_at = self.input_index("input", 0)
        self.mask_at = self.input_index("mask", 1)
        self.require_inputs(2 + self.read_value("value"))

    def forward(self, *inputs):
        xp = self.xp
        x, mask = inputs[self.input_at], inputs[self.mask_at]
        if not xp.isdtype(mask.dtype, "bool"):
            raise ShapeError(f"{self.node.describe()}: mask must be bool, found {mask.dtype}")
        result = xp.where(mask, self.value_for(inputs, x.dtype), x)
        if tuple(result.shape) != tuple(x.shape):
            raise ShapeError(f"{self.node.describe()}: mask {tuple(mask.shape)} does not broadcast to {tuple(x.shape)}")
        return result


class IndexPut(ValueOp):
    """Tensor.index_put(indices, values, accumulate): x[indices] = values (+= with accumulate,
    where repeated indices add up, as in PyTorch)."""

    types = ("IndexPut",)

    def setup(self):
        self.input_at = self.input_index("input", 0)
        self.indices_at = self.input_index("indices", 1)
        self.accumulate = self.bool_param("accumulate", default=False)
        self.require_inputs(2 + self.read_value("values"))

    def forward(self, *inputs):
        xp = self.xp
        x, indices = inputs[self.input_at], inputs[self.indices_at]
        if not isinstance(indices, (list, tuple)):
            indices = [indices]
        key = tuple(index_item(self, item) for item in indices)
        values = self.value_for(inputs, x.dtype)
        # Positions of the selected elements: the same indexing applied to 0, 1, 2, ... (x's layout).
        try:
            positions = indexed(xp, xp.reshape(xp.arange(x.size, dtype=xp.int64), tuple(x.shape)), key)
        except IndexError as exc:
            raise ShapeError(f"{self.node.describe()}: index out of range for shape {tuple(x.shape)}: {exc}") from None
        try:
            values = xp.broadcast_to(values, tuple(positions.shape))
        except ValueError:
            raise ShapeError(f"{self.node.describe()}: values {tuple(values.shape)} do not fit the "
                             f"{tuple(positions.shape)} selected elements") from None
        out = xp.reshape(xp.asarray(x, copy=True), (-1,))
        flat_positions, flat_values = xp.reshape(positions, (-1,)), xp.reshape(values, (-1,))
        if self.accumulate:
            self.backend.scatter_add(out, flat_positions, flat_values)
        else:
            self.backend.put(out, flat_positions, flat_values)
        return xp.reshape(out, tuple(x.shape))


class SliceCopy(Slice):
    """Tensor.slice_copy: a copy of $self with $src written into the slice (Tensor.slice's params)."""

    types = ("SliceCopy",)
    extra_inputs = 1  # $src

    def data_position(self) -> int:
        return self.input_index("self", 0)

    def setup(self):
        super().setup()
        self.src_at = self.input_index("src", 1 - self.data_index)

    def forward(self, *inputs):
        x, src = inputs[self.data_index], inputs[self.src_at]
        key = self.index_key(x, inputs)
        out = self.xp.asarray(x, copy=True)
        try:
            out[key] = src
        except ValueError:
            raise ShapeError(f"{self.node.describe()}: src {tuple(src.shape)} does not fit the slice "
                             f"{tuple(out[key].shape)}") from None
        return out


OPS = [Fill, MaskedFill, IndexPut, SliceCopy]
