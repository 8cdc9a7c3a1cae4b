"""Lower a kernel to a tensor-IR Function over Buffers.

    func grad_case10(dA: float32, dB: float32) -> () {
      for z0 in (0, 10, 1) { for z1 in (0, 8, 1) { dB[z0, z1] = 0.0 } }
      for i0 in (1, 9, 1) {
        for j in (0, 8, 1) {
          dB[i0, j] = (dB[i0, j] + (dA[(i0 - 1), j] / 3.0))
        }
      }
      ...

Parameters are the kernel's inputs then its outputs; every output is zeroed
first, then each statement is a loop nest (left-hand loops outermost), with
an ``if`` for the guard that did not become a loop bound, accumulating into
its target.
"""

from __future__ import annotations

from kuiper.ir.builder import IRBuilder
from kuiper.ir.loops import accumulate, loop_nest, zero_fill
from kuiper.ir.nodes import Block, Function
from kuiper.te.kernel import Kernel
from kuiper.te.nest import Nest, conjunction, normalise


def nests(kernel: Kernel) -> list[Nest]:
    return [normalise(stmt, ranges) for stmt, ranges in zip(kernel.statements, kernel.ranges)]


def lower(kernel: Kernel, name: str | None = None) -> Function:
    builder = IRBuilder()
    for output in kernel.outputs:
        buffer = kernel.buffers[output]
        zero_fill(builder, buffer, [f"z{axis}" for axis in range(len(buffer.shape))])
    for nest in nests(kernel):
        if nest.empty:
            continue
        with loop_nest(builder, nest.loops):
            guard = conjunction(nest.guard)
            if guard is None:
                accumulate(builder, nest.target, nest.value)
            else:
                with builder.if_(guard):
                    accumulate(builder, nest.target, nest.value)
    body = builder.build()
    if not isinstance(body, Block):
        body = Block((body,))
    params = tuple(kernel.buffers[n] for n in [*kernel.inputs, *kernel.outputs])
    return Function(name or kernel.name, params, body)
