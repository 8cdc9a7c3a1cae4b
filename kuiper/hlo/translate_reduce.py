"""HLO reduce, reduce-window, select-and-scatter and map -> Reduce, ReduceWindow, SelectAndScatter, Map;
a reduce-window that is a max pool -> MaxPool{n}d.

A max over windows that start from -inf and slide over some dims only (Flax's ``nn.max_pool``:
window 1x2x2x1 on NHWC) is the shared max pool over the others, the first and last dims it leaves
alone taken as batch and channels; it gets the pooling kernels (oneDNN's) that PyTorch's pools get.
A Flax CNN's two 2x2 pools took 0.12 and 0.08 ms as ReduceWindows on NumPy views, warm.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from ..ops.pooling_window import pool_output_size
from .site import Site
from .translate_called import called, reducer, window
from .translate_common import constant_operand, ints, result, transpose, with_dims
from .tree_reductions import rounds_each_step

POOLED_TYPES = ("f32", "f64")  # element types whose max pools go to MaxPool{n}d


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
    pool = _max_pool(site, params) if count == 1 else None
    if pool is not None:
        return pool
    return [site.op("ReduceWindow", site.inputs, site.outputs, params)]


def _max_pool(site: Site, params: dict) -> list[OpNode] | None:
    """The reduce-window as transpose -> MaxPool{n}d -> transpose, or None where it is not a max pool.

    A max pool: reducer max, initial value -inf (so padding takes no part), no base dilation, and at
    least two dims the window leaves alone (size, stride and dilation 1, no padding): the first of them
    is the batch, the last the channels, the rest the pool's spatial dims in order.  Its padding must be
    PyTorch's: the same before each dim's windows, at most half the window, and the HLO's count of
    windows what PyTorch's floor or ceil rule gives (the padding after is then -inf the pool adds).
    """
    shape, out = site.operand_shape(0), result(site)
    if params["reducer"] != "max" or shape.element_type not in POOLED_TYPES or out.element_type != shape.element_type:
        return None
    init = constant_operand(site, 1)
    if init is None or init.shape != () or not (np.isinf(init) and init < 0):
        return None
    sizes, strides, pads, dilations = params["window"], params["strides"], params["padding"], params["window_dilation"]
    if any(d != 1 for d in params["base_dilation"]) or any(v < 0 for pad in pads for v in pad):
        return None
    still = [axis for axis in range(shape.rank) if (sizes[axis], strides[axis], dilations[axis]) == (1, 1, 1)
             and pads[axis] == [0, 0]]
    if len(still) < 2 or not 1 <= shape.rank - 2 <= 3:
        return None
    spatial = [axis for axis in range(shape.rank) if axis not in (still[0], still[-1])]
    ceil_mode = None
    for axis in spatial:
        k, s, d, (low, _) = sizes[axis], strides[axis], dilations[axis], pads[axis]
        if 2 * low > k:
            return None
        modes = {mode for mode in (False, True)
                 if pool_output_size(shape.dims[axis], k, s, low, d, mode) == out.dims[axis]}
        ceil_mode = modes if ceil_mode is None else ceil_mode & modes
    if not ceil_mode:
        return None
    order = [still[0], still[-1], *spatial]
    x, _, ops = transpose(site, site.inputs[0], shape, order, "pool_in")
    in_place = order == list(range(shape.rank))
    pooled_shape = with_dims(out, [out.dims[axis] for axis in order])
    pooled = site.outputs[0] if in_place else site.temporary("pool", pooled_shape)
    pool_params = {"kernel_size": [sizes[a] for a in spatial], "stride": [strides[a] for a in spatial],
                   "padding": [pads[a][0] for a in spatial], "dilation": [dilations[a] for a in spatial],
                   "ceil_mode": min(ceil_mode)}  # floor where both rules give the HLO's count
    ops.append(site.op(f"MaxPool{len(spatial)}d", [x], [pooled], pool_params, suffix="" if in_place else "pool"))
    if not in_place:
        back = [order.index(axis) for axis in range(shape.rank)]
        ops += transpose(site, pooled, pooled_shape, back, "pool_out", target=site.outputs[0])[2]
    return ops


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
