"""A conv's epilogue as the compiled conv kernels take it: the interpreter's tables and input slots.

The fusion pass gives a conv the math of the elementwise op that was its only reader
(kuiper/graph/fusion.py).  The conv kernels run that math on each output plane right
after computing it, while the plane is in cache, with the same fixed interpreter the
fused elementwise op runs (elementwise_kernels.run_chunks): the math is data, an int64
code table and a float32 constant table; nothing is generated from it.

A kernel takes one tuple ``(code, constant registers, constant values, register count,
x0, x1, x2, x3)``: the program reads the conv's output from its slot (in place: each
chunk is loaded before it is stored) and the other inputs from theirs, all flat and of
the output's size.  ``NONE`` is the tuple of no epilogue (no code rows).
"""

from __future__ import annotations

import numpy as np

from .kernel_codes import INPUT_SLOTS

_NO_INPUT = np.empty(0, np.float32)
NONE = (np.empty((0, 5), np.int64), np.empty(0, np.int64), np.empty(0, np.float32), 0) + (_NO_INPUT,) * INPUT_SLOTS


class Epilogue:
    """The epilogue of one call: its program's tables and the extra inputs, flat, in slot order."""

    def __init__(self, program, operand: int, extras: list[np.ndarray]):
        code, constant_registers, constant_values = program.tables((False,) * (len(extras) + 1))
        self.head = (code, constant_registers, constant_values, program.registers)
        self.operand = operand
        self.extras = extras

    @classmethod
    def prepare(cls, compiled, operand: int, extras, out_shape: tuple[int, ...]) -> "Epilogue | None":
        """The epilogue for a conv output of ``out_shape``, or None when the kernels cannot run it:
        the math is not an interpreter program, or an extra input is not a float32 array of that shape."""
        program = getattr(compiled, "program", None)
        if program is None or len(extras) + 1 > INPUT_SLOTS:
            return None
        flat = []
        for value in extras:
            if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.shape != out_shape:
                return None
            flat.append(np.ascontiguousarray(value).reshape(-1))
        return cls(program, operand, flat)

    def arguments(self, out: np.ndarray, first_image: int = 0) -> tuple:
        """The kernel's tuple for ``out``: the output of images ``first_image``.. of the whole call."""
        size = out.size
        start = first_image * (size // out.shape[0])
        slots = [value[start : start + size] for value in self.extras]
        slots.insert(self.operand, out.reshape(-1))
        slots += [_NO_INPUT] * (INPUT_SLOTS - len(slots))
        return self.head + tuple(slots)
