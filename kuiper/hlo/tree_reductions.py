"""Long reductions of narrow floats, split as XLA's CPU compiler splits them (its TreeReductionRewriter).

XLA's CPU pipeline rewrites a reduce with a reduced dim longer than 32 into a reduce-window (windows
of at most 32 along each reduced dim, as long a stride, padded the "same" way: half the padding low)
and a reduce of the windows' results, again and again until no reduced dim is longer than 32. Each
reduce and reduce-window then folds its elements one after another in the element type. Where every
step rounds (f16, bf16, the 8- and 4-bit floats) the grouping decides the result: 2048 + 32 ones in
f16 is 2048 when the ones follow 2048 in one window, 2064 when half of them fall in a window of their
own. kuiper splits these reductions the same way, and their translators ask the ops to fold in order
(``sequential``), so they round as XLA's do. f32 and f64 reductions are left to NumPy's pairwise
sums: there the grouping changes the last bits only.
"""

from __future__ import annotations

from dataclasses import replace

from .module import HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape, Shape

WINDOW = 32  # XLA's TreeReductionRewriter's default reduce_window_size
# Element types whose every reduction step rounds to the type (XLA's CPU backend accumulates in them).
ROUNDS_EACH_STEP = frozenset([
    "f16", "bf16", "f4e2m1fn", "f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e4m3fnuz", "f8e5m2",
    "f8e5m2fnuz", "f8e8m0fnu",
])


def rounds_each_step(shapes: list[Shape]) -> bool:
    """Whether a reduction over values of these shapes accumulates in a type that rounds at every step."""
    return any(leaf.element_type in ROUNDS_EACH_STEP for shape in shapes for leaf in shape.leaves())


def split_long_reductions(module: HloModule) -> HloModule:
    """``module`` with every long narrow-float reduce split into reduce-windows and a short reduce."""
    computations = {}
    changed = False
    for name, computation in module.computations.items():
        emitted: list[HloInstruction] = []
        taken = set(computation.by_name)
        for instruction in computation.instructions:
            split = _split(computation, instruction, taken)
            changed |= len(split) > 1
            emitted += split
        computations[name] = HloComputation(name, emitted, computation.is_entry, computation.parameter_shapes,
                                            computation.result_shape, computation.position) \
            if len(emitted) != len(computation.instructions) else computation
    return replace(module, computations=computations) if changed else module


def _split(computation: HloComputation, reduce: HloInstruction, taken: set[str]) -> list[HloInstruction]:
    """A reduce as XLA's rewriter leaves it: reduce-windows of at most 32 elements a dim, then the reduce."""
    if reduce.opcode != "reduce" or len(reduce.operands) != 2 or reduce.shape.is_tuple:
        return [reduce]  # XLA leaves variadic reductions whole
    operand, init = reduce.operands
    shape = computation.by_name[operand].shape
    dims = reduce.attributes.get("dimensions")
    dims = [dims] if isinstance(dims, int) else dims
    if shape.is_tuple or not isinstance(dims, list) or not rounds_each_step([shape]) \
            or not all(isinstance(d, int) and 0 <= d < shape.rank for d in dims) \
            or not isinstance(reduce.attributes.get("to_apply"), str):  # (the translator names what is wrong)
        return [reduce]
    if any(shape.dynamic) or any(shape.dims[d] == 0 for d in dims):
        return [reduce]  # a dynamic dim's size is known at run time only; an empty one leaves the init
    emitted = []
    while any(shape.dims[d] > WINDOW for d in dims):
        sizes = [min(n, WINDOW) if d in dims else 1 for d, n in enumerate(shape.dims)]
        counts = [-(-n // size) if size else 0 for n, size in zip(shape.dims, sizes)]
        pads = []
        for n, size, count in zip(shape.dims, sizes, counts):  # XLA's MakePadding(kSame): half low, rest high
            total = max((count - 1) * size + size - n, 0)
            pads.append(f"{total // 2}_{total - total // 2}")
        name = f"{reduce.name}.windows"
        while name in taken:
            name += "_"
        taken.add(name)
        shape = ArrayShape(shape.element_type, tuple(counts))
        window = {"size": "x".join(map(str, sizes)), "stride": "x".join(map(str, sizes)), "pad": "x".join(pads)}
        emitted.append(HloInstruction(name, "reduce-window", shape, [operand, init],
                                      {"window": window, "to_apply": reduce.attributes.get("to_apply")},
                                      position=reduce.position, computation=reduce.computation))
        operand = name
    if not emitted:
        return [reduce]
    return [*emitted, replace(reduce, operands=[operand, init])]
