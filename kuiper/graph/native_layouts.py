"""Which op outputs stay in a kernel's own memory layout between ops.

A kernel library may keep tensors in a layout of its own (oneDNN: channels in blocks of the
SIMD width).  Converting to plain arrays after each op and back before the next costs two
passes over memory per op.  An op that can emit such a layout says so (``Op.native_layout()``);
its output stays in it when every op that reads it takes that layout at that input
(``Op.takes_layout``), and it is not a model output: callers always get plain arrays.

This runs on the built steps, after the ops chose their kernels; it knows no layout itself.
"""

from __future__ import annotations

from collections import defaultdict


def agree_on_layouts(steps, keep: set[str]) -> None:
    """Set ``op.output_layout`` on each step whose only output every reader takes in its native layout."""
    readers: dict[str, list] = defaultdict(list)
    for step in steps:
        for position, operand in enumerate(step.node.inputs):
            readers[operand].append((step.op, position))
    for step in steps:
        layout = step.op.native_layout()
        if layout is None or len(step.node.outputs) != 1:
            continue
        operand = step.node.outputs[0]
        if operand in keep or not readers[operand]:
            continue
        if all(op.takes_layout(position, layout) for op, position in readers[operand]):
            step.op.output_layout = layout
