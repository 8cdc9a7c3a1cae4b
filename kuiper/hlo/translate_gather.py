"""HLO gather and scatter -> Gather and Scatter, dimension numbers as typed params."""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_called import called, flag, reducer
from .translate_common import integer, ints


def _dimension_numbers(site: Site, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    """Lists of dims as params (an optional one absent is empty)."""
    params = {key: list(ints(site, key)) for key in required}
    params.update({key: list(ints(site, key, ())) for key in optional})
    return params


def translate_gather(site: Site) -> list[OpNode]:
    slice_sizes = ints(site, "slice_sizes")
    if len(slice_sizes) != site.operand_shape(0).rank:
        raise site.error(f"slice_sizes={list(slice_sizes)} do not match the operand {site.operand_shape(0)}")
    params = _dimension_numbers(site, ("start_index_map",), ("offset_dims", "collapsed_slice_dims",
                                "operand_batching_dims", "start_indices_batching_dims"))
    params.update(index_vector_dim=integer(site, "index_vector_dim"), slice_sizes=list(slice_sizes),
                  indices_are_sorted=flag(site, "indices_are_sorted"))
    return [site.op("Gather", site.inputs, site.outputs, params)]


def _combiner(site: Site, count: int):
    """``"replace"`` when the computation returns its second parameter (the update), else a reducer."""
    computation = called(site, "to_apply")
    root = computation.root
    if count == 1 and root.opcode == "parameter" and root.parameter_number == 1:
        return "replace"
    return reducer(site, "to_apply", count)


def translate_scatter(site: Site) -> list[OpNode]:
    count = (len(site.inputs) - 1) // 2
    if count == 0 or len(site.inputs) != 2 * count + 1:
        raise site.error(f"expects N operands, the indices and N updates, found {len(site.inputs)} value(s)")
    params = _dimension_numbers(site, ("scatter_dims_to_operand_dims",), ("update_window_dims",
                                "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims"))
    params.update(index_vector_dim=integer(site, "index_vector_dim"), indices_are_sorted=flag(site, "indices_are_sorted"),
                  unique_indices=flag(site, "unique_indices"), combiner=_combiner(site, count))
    return [site.op("Scatter", site.inputs, site.outputs, params)]


TRANSLATORS = {"gather": translate_gather, "scatter": translate_scatter}
