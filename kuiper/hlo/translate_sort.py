"""HLO sort, topk and the TopK custom call -> Sort and TopK.

A comparator that is one ``compare`` of an operand's two parameters (``LT``: ascending,
``GT``: descending), in total order or on a type without NaNs, becomes Sort's ``key`` and
``descending``: a stable argsort.  JAX's float comparator, which first maps -0 to +0 and
every NaN to one NaN, is recognised too (``canonical_nans_and_zeros``).  Any other
comparator is a sub-graph.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .literals import literal_array
from .module import HloComputation, HloInstruction
from .site import Site
from .translate_called import called, flag
from .translate_common import integer, ints


def _is_constant(instruction: HloInstruction, test) -> bool:
    return (instruction.opcode == "constant" and not instruction.shape.is_tuple and instruction.shape.rank == 0
            and bool(test(literal_array(instruction))))


def _compares(instruction: HloInstruction, direction: str, operands: list[str]) -> bool:
    return (instruction.opcode == "compare" and instruction.attributes.get("direction") == direction
            and instruction.operands == operands)


def _parameter_behind(computation: HloComputation, instruction: HloInstruction) -> tuple[int, bool] | None:
    """(parameter number, canonicalised) for a parameter, or JAX's canonical form of one:
    ``select(ne(p, p), nan, select(eq(p, 0), 0, p))``."""
    if instruction.opcode == "parameter":
        return instruction.parameter_number, False
    by_name = computation.by_name
    if instruction.opcode != "select":
        return None
    is_nan, nan, inner = (by_name[o] for o in instruction.operands)
    if inner.opcode != "select":
        return None
    is_zero, zero, value = (by_name[o] for o in inner.operands)
    if value.opcode != "parameter" or len(is_zero.operands) != 2:
        return None
    canonical = (_compares(is_nan, "NE", [value.name, value.name]) and _is_constant(nan, np.isnan)
                 and _compares(is_zero, "EQ", [value.name, is_zero.operands[1]])
                 and _is_constant(by_name[is_zero.operands[1]], lambda v: v == 0) and _is_constant(zero, lambda v: v == 0))
    return (value.parameter_number, True) if canonical else None


def recognised_comparator(computation: HloComputation) -> dict | None:
    """Sort's key params when the comparator is ``compare(p[2k], p[2k+1])`` LT or GT (else None)."""
    root = computation.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    sides = [_parameter_behind(computation, computation.by_name[o]) for o in root.operands]
    if None in sides or sides[0][1] != sides[1][1]:
        return None
    (first, canonical), (second, _) = sides
    low, high = sorted((first, second))
    direction = root.attributes.get("direction")
    if low % 2 or high != low + 1 or direction not in ("LT", "GT"):
        return None
    element_type = computation.by_name[root.operands[0]].shape.element_type
    if element_type.startswith(("f", "bf", "c")) and root.attributes.get("type") != "TOTALORDER":
        return None  # float compare without total order: NaN compares false both ways
    return {"key": low // 2, "descending": (direction == "GT") != (first == high),
            "canonical_nans_and_zeros": canonical}


def translate_sort(site: Site) -> list[OpNode]:
    (axis,) = ints(site, "dimensions")
    flag(site, "is_stable")  # validated; kuiper's sort is always stable
    computation = called(site, "to_apply")
    recognised = recognised_comparator(computation)
    if recognised is None:
        params = {"axis": axis, "comparator": site.subgraph(computation, vectorized=True)}
    else:
        params = {"axis": axis, **recognised}
    return [site.op("Sort", site.inputs, site.outputs, params)]


def _index_dtype(site: Site) -> str:
    leaves = site.instruction.shape.leaves()
    if len(leaves) != 2:
        raise site.error(f"gives values and indices, found the result {site.instruction.shape}")
    return leaves[1].dtype


def translate_topk(site: Site) -> list[OpNode]:
    params = {"k": integer(site, "k"), "largest": flag(site, "largest", True), "index_dtype": _index_dtype(site)}
    return [site.op("TopK", site.inputs, site.outputs, params)]


def translate_topk_custom_call(site: Site) -> list[OpNode]:
    """``custom-call(x), custom_call_target="TopK"``: k from the result shape, a GT or LT comparator."""
    index_dtype = _index_dtype(site)
    names = site.instruction.called_computations()
    root = site.module.computations[names[0]].root if names else None
    direction = root.attributes.get("direction") if root is not None and root.opcode == "compare" else "GT"
    if direction not in ("GT", "LT"):
        raise site.error(f"the TopK comparator must compare GT or LT, found {direction!r}")
    params = {"k": site.instruction.shape.leaves()[0].dims[-1], "largest": direction == "GT",
              "index_dtype": index_dtype}
    return [site.op("TopK", site.inputs, site.outputs, params)]


TRANSLATORS = {"sort": translate_sort, "topk": translate_topk, "custom-call.TopK": translate_topk_custom_call}
