"""HLO sort, topk and the TopK custom call -> Sort and TopK.

A comparator that is one ``compare`` of an operand's two parameters (``LT``: ascending,
``GT``: descending), in total order or on a type without NaNs, becomes Sort's ``key`` and
``descending``: a stable argsort.  Any other comparator is a sub-graph.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .module import HloComputation
from .site import Site
from .translate_called import called, flag
from .translate_common import integer, ints


def recognised_comparator(computation: HloComputation) -> tuple[int, bool] | None:
    """(key operand, descending) when the comparator is ``compare(p[2k], p[2k+1])`` LT or GT."""
    root = computation.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    first, second = (computation.by_name[o] for o in root.operands)
    if first.opcode != "parameter" or second.opcode != "parameter":
        return None
    low, high = sorted((first.parameter_number, second.parameter_number))
    direction = root.attributes.get("direction")
    if low % 2 or high != low + 1 or direction not in ("LT", "GT"):
        return None
    if first.shape.element_type.startswith(("f", "bf", "c")) and root.attributes.get("type") != "TOTALORDER":
        return None  # float compare without total order: NaN compares false both ways
    swapped = first.parameter_number == high
    return low // 2, (direction == "GT") != swapped


def translate_sort(site: Site) -> list[OpNode]:
    (axis,) = ints(site, "dimensions")
    flag(site, "is_stable")  # validated; kuiper's sort is always stable
    computation = called(site, "to_apply")
    recognised = recognised_comparator(computation)
    if recognised is None:
        params = {"axis": axis, "comparator": site.subgraph(computation, vectorized=True)}
    else:
        params = {"axis": axis, "key": recognised[0], "descending": recognised[1]}
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
