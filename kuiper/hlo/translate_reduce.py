"""HLO reduce, reduce-window, select-and-scatter and map -> Reduce, ReduceWindow, SelectAndScatter, Map."""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_called import called, reducer, window
from .translate_common import ints
from .tree_reductions import rounds_each_step


def _operand_count(site: Site) -> int:
    """N for instructions whose operands are N arrays and then N initial values."""
    count = len(site.inputs)
    if count % 2 or count == 0:
        raise site.error(f"expects N operands and N initial values, found {count} value(s)")
    return count // 2


def _in_order(site: Site, count: int) -> dict:
    """``sequential``: f16, bf16 and the 8- and 4-bit floats accumulate one element after another,
    each step rounded to the type, as on XLA's CPU backend (kuiper/hlo/tree_reductions.py)."""
    return {"sequential": True} if rounds_each_step([site.operand_shape(i) for i in range(count)]) else {}


def translate_reduce(site: Site) -> list[OpNode]:
    count = _operand_count(site)
    params = {"axes": list(ints(site, "dimensions")), "reducer": reducer(site, "to_apply", count),
              **_in_order(site, count)}
    return [site.op("Reduce", site.inputs, site.outputs, params)]


def translate_reduce_window(site: Site) -> list[OpNode]:
    count = _operand_count(site)
    params = {**window(site, site.operand_shape(0).rank), "reducer": reducer(site, "to_apply", count),
              **_in_order(site, count)}
    return [site.op("ReduceWindow", site.inputs, site.outputs, params)]


def translate_select_and_scatter(site: Site) -> list[OpNode]:
    params = {**window(site, site.operand_shape(0).rank),
              "select": site.subgraph(called(site, "select"), vectorized=True),
              "scatter": reducer(site, "scatter")}
    return [site.op("SelectAndScatter", site.inputs, site.outputs, params)]


def translate_map(site: Site) -> list[OpNode]:
    return [site.op("Map", site.inputs, site.outputs,
                    {"function": site.subgraph(called(site, "to_apply"), vectorized=True)})]


TRANSLATORS = {
    "reduce": translate_reduce,
    "reduce-window": translate_reduce_window,
    "select-and-scatter": translate_select_and_scatter,
    "map": translate_map,
}
