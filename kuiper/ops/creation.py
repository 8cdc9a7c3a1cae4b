"""Tensors made from numbers rather than inputs: torch.arange.

pnnx folds an arange of constants into a pnnx.Attribute; it keeps ``torch.arange``
when start, end or step come from the graph (usually a size).  Each of them is a param
or an input bound to ``$start``/``$end``/``$step`` (unkeyed inputs: end; start, end;
start, end, step, as in the Python signature).
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ir.dtypes import array_dtype
from .base import Op

# The dtypes arange may be asked for (array-API names; the PNNX frontend translates torch.float & co).
DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8")


class Arange(Op):
    types = ("Arange",)
    fresh_output = True
    names = ("start", "end", "step")

    def setup(self):
        count = len(self.node.inputs)
        unkeyed = all(key is None for key in self.node.input_keys)
        positional = {1: ("end",), 2: ("start", "end"), 3: ("start", "end", "step")}.get(count, ()) if unkeyed else ()
        self.sources = {}
        for name in self.names:
            position = positional.index(name) if name in positional else self.input_index(name)
            if position is not None:
                self.sources[name] = ("input", position)
            elif self.param(name, None) is not None:
                value = self.param(name)
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise self.error(f"param '{name}' must be a number, found {value!r}")
                self.sources[name] = ("param", value)
        if "end" not in self.sources:
            raise self.error("needs 'end' (a param or an input bound to $end)")
        used = sorted(position for kind, position in self.sources.values() if kind == "input")
        if used != list(range(count)):
            raise self.error("has an input not bound to $start, $end or $step")
        dtype = self.param("dtype", None)
        if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPES):  # `dtype=(0)` is a list
            raise self.unsupported("dtype", dtype, sorted(DTYPES))
        self.dtype = dtype

    def _number(self, name, inputs, default):
        kind, value = self.sources.get(name, ("param", default))
        if kind == "input":
            value = inputs[value]
            if getattr(value, "ndim", 0) != 0:
                raise ShapeError(f"{self.node.describe()}: {name} must be a scalar, found shape {tuple(value.shape)}")
            value = value.item() if hasattr(value, "item") else value
        return value

    def forward(self, *inputs):
        xp = self.xp
        start, end, step = (self._number(n, inputs, d) for n, d in zip(self.names, (0, None, 1)))
        if step == 0:
            raise ShapeError(f"{self.node.describe()}: step must be nonzero")
        numbers = (start, end, step)
        dtype = self.dtype or ("int64" if all(float(v).is_integer() and not isinstance(v, float) for v in numbers)
                               else "float32")
        count = max(0, math.ceil((end - start) / step))
        # start + i * step in float64, then cast: PyTorch's float arange is computed the same way.
        values = xp.arange(count, dtype=xp.float64) * step + start
        return xp.astype(values, array_dtype(xp, dtype))


OPS = [Arange]
