"""Emitting a translation: canonical ops into fresh intermediate values, the last one into the node's output.

Most ONNX ops become one canonical op; some become a short chain (``Mod`` with Python's sign rule is
a remainder and a correction, ``HardSigmoid`` a multiply-add and a clamp). ``Emit`` names the
intermediate values after the node and keeps their dtypes, so a chain reads like the formula::

    emit = Emit(site)
    r = emit.fn("remainder", [a, b])
    emit.fn("select", [fix, emit.fn("add", [r, b]), r], out=site.outputs[0])
    return emit.ops
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .site import Site

COMPARE_DTYPE = "bool"
# Storage-only float types (ml_dtypes): their arithmetic runs in float32 and rounds back, as ONNX's reference does.
NARROW_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
_NOT_ARITHMETIC = ("convert", "select", "compare")


class Emit:
    def __init__(self, site: Site):
        self.site = site
        self.ops: list[OpNode] = []
        self._count = 0

    def dtype(self, name: str) -> str:
        return self.site.values.dtype(name, self.site)

    def _name(self, out: str | None, dtype: str, shape=None) -> str:
        if out is not None:
            return out
        self._count += 1
        return self.site.temporary(f"t{self._count}", dtype, shape)

    def op(self, op_type: str, inputs: list[str], params: dict | None = None, *, dtype: str,
           out: str | None = None, shape=None, attrs: dict | None = None) -> str:
        """One canonical op into ``out`` (else a new value of ``dtype``); returns the value's name."""
        output = self._name(out, dtype, shape)
        suffix = "" if out is not None and out == self.site.outputs[0] and len(self.site.outputs) == 1 \
            else f"op{len(self.ops)}"
        self.ops.append(self.site.op(op_type, inputs, [output], params, attrs, suffix=suffix))
        return output

    def op_many(self, op_type: str, inputs: list[str], outputs: list[str], params: dict | None = None) -> None:
        """One canonical op with several outputs, named by the caller."""
        self.ops.append(self.site.op(op_type, inputs, outputs, params, suffix=f"op{len(self.ops)}"))

    def fn(self, function: str, inputs: list[str], dtype: str | None = None, out: str | None = None,
           **params) -> str:
        """The canonical ``Elementwise`` op of ``function`` (its result dtype: ``dtype``, else the first input's)."""
        operand_dtypes = [self.dtype(name) for name in inputs]
        if dtype is None:
            dtype = COMPARE_DTYPE if function == "compare" else operand_dtypes[-1 if function == "select" else 0]
        if function not in _NOT_ARITHMETIC and dtype in NARROW_FLOATS:
            wide = [self.convert(name, "float32") if t in NARROW_FLOATS else name
                    for name, t in zip(inputs, operand_dtypes)]
            return self.convert(self.fn(function, wide, "float32", **params), dtype, out=out)
        params = {"function": function, "operand_dtypes": operand_dtypes, "dtype": dtype, **params}
        return self.op("Elementwise", inputs, params, dtype=dtype, out=out)

    def compare(self, direction: str, a: str, b: str, out: str | None = None) -> str:
        return self.fn("compare", [a, b], out=out, direction=direction)

    def convert(self, name: str, dtype: str, out: str | None = None) -> str:
        if self.dtype(name) == dtype and out is None:
            return name
        return self.fn("convert", [name], dtype, out=out)

    def const(self, value, dtype: str) -> str:
        """A constant (a scalar or an array) of ``dtype``, made at load time."""
        self._count += 1
        name, node = self.site.constant_op(np.asarray(value, dtype=dtype), f"c{self._count}")
        self.ops.append(node)
        return name
