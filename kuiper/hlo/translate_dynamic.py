"""HLO's bounded dynamic dims -> DimensionSize, SetDimensionSize, ReshapeToSizes.

``f32[<=8]`` declares a bound; the size lives in a run-time s32 scalar. kuiper holds each array at
its true size: ``get-dimension-size`` reads it, ``set-dimension-size`` cuts the dim to it, and
``dynamic-reshape(x, sizes...)`` reshapes to the sizes (each within the result's bound).
"""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_common import ints, operand, result


def _dimension(site: Site) -> int:
    dims = ints(site, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand(site, 0).rank:
        raise site.error(f"dimensions={list(dims)} must name one dim of {operand(site, 0)}")
    return dims[0]


def translate_get_dimension_size(site: Site) -> list[OpNode]:
    params = {"dim": _dimension(site), "dtype": result(site).dtype}
    return [site.op("DimensionSize", site.inputs, site.outputs, params)]


def translate_set_dimension_size(site: Site) -> list[OpNode]:
    return [site.op("SetDimensionSize", site.inputs, site.outputs, {"dim": _dimension(site)})]


def translate_dynamic_reshape(site: Site) -> list[OpNode]:
    shape = result(site)
    if len(site.inputs) != 1 + shape.rank:
        raise site.error(f"expects the operand and {shape.rank} size(s) for {shape}, found {len(site.inputs)} "
                         "operand(s)")
    return [site.op("ReshapeToSizes", site.inputs, site.outputs, {"bounds": list(shape.dims)})]


TRANSLATORS = {
    "get-dimension-size": translate_get_dimension_size,
    "set-dimension-size": translate_set_dimension_size,
    "dynamic-reshape": translate_dynamic_reshape,
}
