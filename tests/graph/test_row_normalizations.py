"""Softmax, log-softmax and layer norm written out step by step become one op (kuiper/graph/row_normalizations.py),
and give what the steps give: checked against the same model built without the graph passes (``fuse=False``)
and against float64 NumPy references of the formula the steps state; chains that differ in a detail stay."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.graph import build
from kuiper.model_ir import ModelIR, OperandInfo, OpNode

# As JAX 0.10.2 writes them (tools/bench_flax_models.py's setting): flax.linen.LayerNorm() (fast variance,
# scale and bias as arguments), jax.nn.softmax and jax.nn.log_softmax, over the last axis of (2, 3, 8).
REDUCERS = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

FLAX_LAYER_NORM = "HloModule flax_layer_norm\n" + REDUCERS + """
ENTRY main.3 {
  args_0_.1 = f32[2,3,8]{2,1,0} parameter(2)
  constant.7 = f32[] constant(0)
  reduce_sum.14 = f32[2,3]{1,0} reduce(args_0_.1, constant.7), dimensions={2}, to_apply=add_f32
  constant.6 = f32[] constant(8)
  broadcast.5 = f32[2,3]{1,0} broadcast(constant.6), dimensions={}
  div.2 = f32[2,3]{1,0} divide(reduce_sum.14, broadcast.5)
  broadcast_in_dim.2 = f32[2,3,1]{2,1,0} reshape(div.2)
  sub.6 = f32[2,3,1]{2,1,0} broadcast(broadcast_in_dim.2), dimensions={0,1,2}
  sub.7 = f32[2,3]{1,0} reshape(sub.6)
  sub.8 = f32[2,3,8]{2,1,0} broadcast(sub.7), dimensions={0,1}
  sub.9 = f32[2,3,8]{2,1,0} subtract(args_0_.1, sub.8)
  square.2 = f32[2,3,8]{2,1,0} multiply(args_0_.1, args_0_.1)
  reduce_sum.15 = f32[2,3]{1,0} reduce(square.2, constant.7), dimensions={2}, to_apply=add_f32
  div.3 = f32[2,3]{1,0} divide(reduce_sum.15, broadcast.5)
  square.3 = f32[2,3]{1,0} multiply(div.2, div.2)
  sub.5 = f32[2,3]{1,0} subtract(div.3, square.3)
  constant.5 = f32[] constant(0)
  broadcast.4 = f32[2,3]{1,0} broadcast(constant.5), dimensions={}
  max.1 = f32[2,3]{1,0} maximum(sub.5, broadcast.4)
  broadcast_in_dim.3 = f32[2,3,1]{2,1,0} reshape(max.1)
  constant.4 = f32[] constant(1e-06)
  broadcast.3 = f32[2,3,1]{2,1,0} broadcast(constant.4), dimensions={}
  add.5 = f32[2,3,1]{2,1,0} add(broadcast_in_dim.3, broadcast.3)
  rsqrt.1 = f32[2,3,1]{2,1,0} rsqrt(add.5)
  mul.8 = f32[2,3,1]{2,1,0} broadcast(rsqrt.1), dimensions={0,1,2}
  mul.9 = f32[2,3]{1,0} reshape(mul.8)
  mul.10 = f32[2,3,8]{2,1,0} broadcast(mul.9), dimensions={0,1}
  variables__params____scale__.1 = f32[8]{0} parameter(1)
  reshape.2 = f32[1,1,8]{2,1,0} reshape(variables__params____scale__.1)
  mul.11 = f32[1,1,8]{2,1,0} broadcast(reshape.2), dimensions={0,1,2}
  mul.12 = f32[8]{0} reshape(mul.11)
  mul.13 = f32[2,3,8]{2,1,0} broadcast(mul.12), dimensions={2}
  mul.14 = f32[2,3,8]{2,1,0} multiply(mul.10, mul.13)
  mul.15 = f32[2,3,8]{2,1,0} multiply(sub.9, mul.14)
  variables__params____bias__.1 = f32[8]{0} parameter(0)
  reshape.3 = f32[1,1,8]{2,1,0} reshape(variables__params____bias__.1)
  add.6 = f32[1,1,8]{2,1,0} broadcast(reshape.3), dimensions={0,1,2}
  add.7 = f32[8]{0} reshape(add.6)
  add.8 = f32[2,3,8]{2,1,0} broadcast(add.7), dimensions={2}
  ROOT add.9 = f32[2,3,8]{2,1,0} add(mul.15, add.8)
}
"""

JAX_SOFTMAX = "HloModule jax_softmax\n" + REDUCERS + """
ENTRY main.3 {
  v.1 = f32[2,3,8]{2,1,0} parameter(0)
  constant.5 = f32[] constant(-inf)
  reduce_max.7 = f32[2,3]{1,0} reduce(v.1, constant.5), dimensions={2}, to_apply=max_f32
  constant.3 = f32[] constant(-inf)
  broadcast.1 = f32[2,3]{1,0} broadcast(constant.3), dimensions={}
  max.1 = f32[2,3]{1,0} maximum(reduce_max.7, broadcast.1)
  broadcast_in_dim.2 = f32[2,3,1]{2,1,0} reshape(max.1)
  sub.4 = f32[2,3,1]{2,1,0} broadcast(broadcast_in_dim.2), dimensions={0,1,2}
  sub.5 = f32[2,3]{1,0} reshape(sub.4)
  sub.6 = f32[2,3,8]{2,1,0} broadcast(sub.5), dimensions={0,1}
  sub.7 = f32[2,3,8]{2,1,0} subtract(v.1, sub.6)
  exp.1 = f32[2,3,8]{2,1,0} exponential(sub.7)
  constant.4 = f32[] constant(0)
  reduce_sum.7 = f32[2,3]{1,0} reduce(exp.1, constant.4), dimensions={2}, to_apply=add_f32
  broadcast_in_dim.3 = f32[2,3,1]{2,1,0} reshape(reduce_sum.7)
  div.4 = f32[2,3,1]{2,1,0} broadcast(broadcast_in_dim.3), dimensions={0,1,2}
  div.5 = f32[2,3]{1,0} reshape(div.4)
  div.6 = f32[2,3,8]{2,1,0} broadcast(div.5), dimensions={0,1}
  ROOT div.7 = f32[2,3,8]{2,1,0} divide(exp.1, div.6)
}
"""

JAX_LOG_SOFTMAX = "HloModule jax_log_softmax\n" + REDUCERS + """
log_softmax.3 {
  Arg_0.1 = f32[2,3,8]{2,1,0} parameter(0)
  constant.5 = f32[] constant(-inf)
  reduce_max.7 = f32[2,3]{1,0} reduce(Arg_0.1, constant.5), dimensions={2}, to_apply=max_f32
  constant.3 = f32[] constant(-inf)
  broadcast.1 = f32[2,3]{1,0} broadcast(constant.3), dimensions={}
  max.1 = f32[2,3]{1,0} maximum(reduce_max.7, broadcast.1)
  broadcast_in_dim.2 = f32[2,3,1]{2,1,0} reshape(max.1)
  sub.8 = f32[2,3,1]{2,1,0} broadcast(broadcast_in_dim.2), dimensions={0,1,2}
  sub.9 = f32[2,3]{1,0} reshape(sub.8)
  sub.10 = f32[2,3,8]{2,1,0} broadcast(sub.9), dimensions={0,1}
  sub.11 = f32[2,3,8]{2,1,0} subtract(Arg_0.1, sub.10)
  exp.1 = f32[2,3,8]{2,1,0} exponential(sub.11)
  constant.4 = f32[] constant(0)
  reduce_sum.7 = f32[2,3]{1,0} reduce(exp.1, constant.4), dimensions={2}, to_apply=add_f32
  broadcast_in_dim.3 = f32[2,3,1]{2,1,0} reshape(reduce_sum.7)
  log.1 = f32[2,3,1]{2,1,0} log(broadcast_in_dim.3)
  sub.12 = f32[2,3,1]{2,1,0} broadcast(log.1), dimensions={0,1,2}
  sub.13 = f32[2,3]{1,0} reshape(sub.12)
  sub.14 = f32[2,3,8]{2,1,0} broadcast(sub.13), dimensions={0,1}
  ROOT sub.15 = f32[2,3,8]{2,1,0} subtract(sub.11, sub.14)
}

ENTRY main.4 {
  v.1 = f32[2,3,8]{2,1,0} parameter(0)
  ROOT jit_log_softmax_.1 = f32[2,3,8]{2,1,0} call(v.1), to_apply=log_softmax.3
}
"""


def _shape(dims) -> str:
    return "f32[" + ",".join(str(d) for d in dims) + "]"


def layer_norm_text(shape=(2, 3, 8), axis=2, spread=None, eps="1e-06", count=None, floor="0", fast=True, scale=True,
                    bias=True, eps_after_rsqrt=False, mean_output=False) -> str:
    """A layer norm over ``axis`` written out as the canonical steps (Flax's formula), with the knobs the
    near-misses turn; ``spread``: the axis the statistics, scale and bias are repeated along (``axis``).
    Parameters: x, then scale and bias (when present)."""
    spread = axis if spread is None else spread
    full, rows = _shape(shape), _shape([d for i, d in enumerate(shape) if i != axis])
    row_dims = ",".join(str(i) for i in range(len(shape)) if i != spread)
    width = shape[axis]
    lines = [f"x = {full} parameter(0)",
             "zero = f32[] constant(0)",
             f"total = {rows} reduce(x, zero), dimensions={{{axis}}}, to_apply=add_f32",
             f"count = f32[] constant({count or width})",
             f"counts = {rows} broadcast(count), dimensions={{}}",
             f"mean = {rows} divide(total, counts)",
             f"mean_wide = {full} broadcast(mean), dimensions={{{row_dims}}}",
             f"centered = {full} subtract(x, mean_wide)"]
    if fast:
        lines += [f"square = {full} multiply(x, x)",
                  f"squares = {rows} reduce(square, zero), dimensions={{{axis}}}, to_apply=add_f32",
                  f"mean_of_squares = {rows} divide(squares, counts)",
                  f"mean_squared = {rows} multiply(mean, mean)",
                  f"difference = {rows} subtract(mean_of_squares, mean_squared)",
                  f"floor = f32[] constant({floor})",
                  f"floors = {rows} broadcast(floor), dimensions={{}}",
                  f"var = {rows} maximum(difference, floors)"]
    else:
        lines += [f"square = {full} multiply(centered, centered)",
                  f"squares = {rows} reduce(square, zero), dimensions={{{axis}}}, to_apply=add_f32",
                  f"var = {rows} divide(squares, counts)"]
    lines += [f"eps = f32[] constant({eps})", f"epss = {rows} broadcast(eps), dimensions={{}}"]
    if eps_after_rsqrt:
        lines += [f"root = {rows} rsqrt(var)", f"inverse = {rows} add(root, epss)"]
    else:
        lines += [f"shifted = {rows} add(var, epss)", f"inverse = {rows} rsqrt(shifted)"]
    lines += [f"factor = {full} broadcast(inverse), dimensions={{{row_dims}}}"]
    parameter = 1
    if scale:
        lines += [f"scale = f32[{width}] parameter({parameter})",
                  f"scale_wide = {full} broadcast(scale), dimensions={{{spread}}}",
                  f"scaled = {full} multiply(factor, scale_wide)"]
        parameter += 1
    lines += [f"out = {full} multiply(centered, {'scaled' if scale else 'factor'})"]
    if bias:
        lines += [f"bias = f32[{width}] parameter({parameter})",
                  f"bias_wide = {full} broadcast(bias), dimensions={{{spread}}}",
                  f"out_biased = {full} add(out, bias_wide)"]
    if mean_output:
        lines += [f"ROOT both = ({full}, {rows}) tuple({'out_biased' if bias else 'out'}, mean)"]
    else:
        lines[-1] = "ROOT " + lines[-1]
    return "HloModule layer_norm\n" + REDUCERS + "\nENTRY main {\n  " + "\n  ".join(lines) + "\n}\n"


def softmax_text(shape=(2, 3, 8), axis=2, spread=None, log=False, exp_output=False, shift_other=False) -> str:
    """A softmax (or log-softmax) over ``axis`` written out as JAX writes it, without the reshapes.
    ``spread``: the axis the per-row values are repeated along (``axis``); ``shift_other``: the max is
    taken of a second input y, not of x."""
    spread = axis if spread is None else spread
    full, rows = _shape(shape), _shape([d for i, d in enumerate(shape) if i != axis])
    row_dims = ",".join(str(i) for i in range(len(shape)) if i != spread)
    lines = [f"x = {full} parameter(0)",
             f"y = {full} parameter(1)" if shift_other else "",
             "low = f32[] constant(-inf)",
             f"peak = {rows} reduce({'y' if shift_other else 'x'}, low), dimensions={{{axis}}}, to_apply=max_f32",
             f"lows = {rows} broadcast(low), dimensions={{}}",
             f"bounded = {rows} maximum(peak, lows)",
             f"peak_wide = {full} broadcast(bounded), dimensions={{{row_dims}}}",
             f"shifted = {full} subtract(x, peak_wide)",
             f"exps = {full} exponential(shifted)",
             "zero = f32[] constant(0)",
             f"total = {rows} reduce(exps, zero), dimensions={{{axis}}}, to_apply=add_f32"]
    if log:
        lines += [f"logs = {rows} log(total)",
                  f"logs_wide = {full} broadcast(logs), dimensions={{{row_dims}}}",
                  f"out = {full} subtract(shifted, logs_wide)"]
    else:
        lines += [f"total_wide = {full} broadcast(total), dimensions={{{row_dims}}}",
                  f"out = {full} divide(exps, total_wide)"]
    if exp_output:
        lines += [f"ROOT both = ({full}, {full}) tuple(out, exps)"]
    else:
        lines[-1] = "ROOT " + lines[-1]
    return "HloModule softmax\n" + REDUCERS + "\nENTRY main {\n  " + "\n  ".join(line for line in lines if line) + "\n}\n"


# -- references -------------------------------------------------------------------------------------------


def fast_layer_norm_reference(x, scale, bias, eps=1e-6):
    """Flax's fast-variance layer norm over the last axis: sums in float64, then float32 rounding at each step
    the formula rounds (the means, mean^2, their difference), the rest in float64."""
    f32, count = np.float32, np.float32(x.shape[-1])
    with np.errstate(all="ignore"):
        mean = x.astype(np.float64).sum(-1, keepdims=True).astype(f32) / count
        mean_of_squares = (x * x).astype(np.float64).sum(-1, keepdims=True).astype(f32) / count
        var = np.maximum(mean_of_squares - mean * mean, f32(0))
        inverse = 1 / np.sqrt(var.astype(np.float64) + float(f32(eps)))
        return (x - mean.astype(np.float64)) * inverse * scale + bias


def two_pass_layer_norm_reference(x, scale, bias, eps=1e-6):
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        centered = x - x.mean(-1, keepdims=True)
        return centered / np.sqrt((centered * centered).mean(-1, keepdims=True) + float(np.float32(eps))) * scale + bias


def softmax_reference(x, log=False):
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        shifted = x - x.max(-1, keepdims=True)
        if log:
            return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        exps = np.exp(shifted)
        return exps / exps.sum(-1, keepdims=True)


def _step_types(model) -> list[str]:
    return [step.node.type for step in model.steps]


def _both(text: str, *arrays, **options):
    """(what the model gives with the graph passes, what it gives built without them), and the model."""
    model = kuiper.load_hlo(text, threads=1, **options)
    return model, model(*arrays), kuiper.load_hlo(text, threads=1, fuse=False, **options)(*arrays)


# Rows with a large mean, made so that every float32 sum of them is exact: all summation orders then agree,
# and the variance is decided by the formula's own roundings (mean^2 rounded to float32), which the two-pass
# variance does not have: 0.0625 here against 0.046875.
LARGE_MEAN_ROW = np.float32(512) + np.array([1, 2, 2, 1, 1, 1, 1, 1], np.float32) / 2


def layer_norm_input(rng) -> np.ndarray:
    """(2, 3, 8): three ordinary rows, a row with a large mean, a row holding NaN, a row holding +inf."""
    x = (rng.standard_normal((6, 8)) * 3 + 1).astype(np.float32)
    x[3] = LARGE_MEAN_ROW
    x[4, 2] = np.nan
    x[5, 6] = np.inf
    return x.reshape(2, 3, 8)


# -- layer norm ---------------------------------------------------------------------------------------------


def test_flax_layer_norm_becomes_one_op_computing_the_fast_variance_formula():
    rng = np.random.default_rng(0)
    x = layer_norm_input(rng)
    scale, bias = (rng.standard_normal(8) + 1).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    model, got, unrewritten = _both(FLAX_LAYER_NORM, bias, scale, x)
    assert _step_types(model) == ["LayerNorm"]
    assert model.steps[0].node.params == {"normalized_shape": [8], "eps": float(np.float32(1e-6)),
                                          "fast_variance": True}
    np.testing.assert_allclose(got, unrewritten, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got, fast_layer_norm_reference(x, scale, bias), rtol=2e-6, atol=2e-6)
    assert np.isnan(got[1, 1:]).all()  # the rows holding NaN and +inf are NaN throughout, as written
    # The large-mean row tells the fast variance from the two-pass one, which a rewrite must not take.
    two_pass = two_pass_layer_norm_reference(x, scale, bias)[1, 0]
    assert np.max(np.abs(got[1, 0] - two_pass)) > 0.05


def test_a_variance_clipped_at_zero_and_squares_overflowing_float32_stay_as_the_formula_says():
    # The first row's float32 mean^2 rounds above its mean of squares (var < 0 before the clip: rsqrt(eps));
    # the second row's squares overflow float32 (inf - inf: NaN).  Each summation order gives its own
    # variance for the first row, so the reference (exact sums, the formula's roundings) decides.
    rng = np.random.default_rng(4)
    x = np.float32(3000.1) + (rng.standard_normal((2, 3, 8)) * 1e-3).astype(np.float32)
    mean = np.float32(x[0, 0].astype(np.float64).sum()) / np.float32(8)
    squares = np.float32((x[0, 0] * x[0, 0]).astype(np.float64).sum()) / np.float32(8)
    assert squares - mean * mean < 0  # the clip applies to this row
    x[0, 1] = np.float32(3e19)
    scale, bias = np.ones(8, np.float32), np.zeros(8, np.float32)
    model, got, _ = _both(FLAX_LAYER_NORM, bias, scale, x)
    assert _step_types(model) == ["LayerNorm"]
    np.testing.assert_allclose(got, fast_layer_norm_reference(x, scale, bias), rtol=2e-6, atol=2e-6)
    assert np.isnan(got[0, 1]).all()


def test_scale_and_bias_bound_at_load_time_feed_the_one_op():
    rng = np.random.default_rng(1)
    x = layer_norm_input(rng)
    scale, bias = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    model = kuiper.load_hlo(FLAX_LAYER_NORM, threads=1, constants={0: bias, 1: scale})
    assert "LayerNorm" in _step_types(model)
    np.testing.assert_allclose(model(x), fast_layer_norm_reference(x, scale, bias), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("scale, bias", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("fast", [True, False], ids=["fast_variance", "two_pass"])
def test_layer_norms_with_or_without_scale_and_bias_become_one_op(scale, bias, fast):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 3, 8)) * 2 + 0.5).astype(np.float32)
    x[1, 2, 4] = np.nan
    weights = [rng.standard_normal(8).astype(np.float32) for present in (scale, bias) if present]
    text = layer_norm_text(fast=fast, scale=scale, bias=bias, eps="0.001")
    model, got, unrewritten = _both(text, x, *weights)
    assert _step_types(model) == ["LayerNorm"]
    node = model.steps[0].node
    assert node.params.get("fast_variance", False) is fast and node.params["eps"] == float(np.float32(1e-3))
    assert node.input_keys == ["input"] + ["weight"] * scale + ["bias"] * bias
    np.testing.assert_allclose(got, unrewritten, rtol=2e-6, atol=2e-6)
    w = weights[0] if scale else 1.0
    b = weights[-1] if bias else 0.0
    reference = fast_layer_norm_reference if fast else two_pass_layer_norm_reference
    np.testing.assert_allclose(got, reference(x, w, b, 1e-3), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("change", [
    {"axis": 1},  # statistics over another axis
    {"shape": (2, 8, 8), "axis": 1, "spread": 2},  # over another axis, repeated along the last
    {"eps_after_rsqrt": True},  # epsilon added to rsqrt(var), not to var
    {"count": 7},  # a mean that does not divide by the row length
    {"floor": "1e-05"},  # the variance clipped at another value
    {"mean_output": True},  # the mean also a model output: an intermediate read elsewhere
], ids=["other_axis", "other_axis_spread_along_last", "eps_after_rsqrt", "other_count", "other_floor", "mean_is_an_output"])
def test_layer_norm_chains_that_differ_stay_as_written(change):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(change.get("shape", (2, 3, 8))).astype(np.float32)
    width = x.shape[change.get("axis", 2)]
    scale, bias = rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)
    model, got, unrewritten = _both(layer_norm_text(**change), x, scale, bias)
    assert "LayerNorm" not in _step_types(model)
    for mine, theirs in zip(*[(g,) if isinstance(g, np.ndarray) else g for g in (got, unrewritten)]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-6)


# ONNX's layer norm before opset 17 (torch.onnx.export's ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
# Add), as kuiper's ONNX frontend writes it in the canonical op set: mean reductions keeping the dim, the
# elementwise ops broadcasting (rows, 1) values and (width,) weights themselves.


def onnx_layer_norm_graph(shape=(2, 3, 8), dim=-1, square="power", scale=True, bias=True, eps_after_sqrt=False,
                          mean_output=False, keepdim=True, exponent=2.0) -> ModelIR:
    """``keepdim=False``: the means dropped the dim and a Reshape gives each a trailing 1 (shape[:-1] + (1,))."""
    rows_kept = tuple(1 if i == dim % len(shape) else d for i, d in enumerate(shape))
    if not keepdim:
        rows_kept = (*shape[:-1], 1)
    width = shape[-1]

    def elementwise(function, inputs, output, arity=2):
        return OpNode("Elementwise", output, inputs, [output],
                      {"function": function, "operand_dtypes": ["float32"] * arity, "dtype": "float32"})

    def constant(name, value):
        return OpNode("Constant", name, [], [name], attrs={"data": np.asarray(value, np.float32)})

    def mean(source, output):
        if keepdim:
            return [OpNode("Reduction", output, [source], [output], {"dim": [dim], "keepdim": True, "reduction": "mean"})]
        return [OpNode("Reduction", output + "_flat", [source], [output + "_flat"],
                       {"dim": [dim], "keepdim": False, "reduction": "mean"}),
                OpNode("Reshape", output, [output + "_flat"], [output], {"shape": list(rows_kept)})]

    nodes = [*mean("x", "m"), elementwise("subtract", ["x", "m"], "d")]
    if square == "power":
        nodes += [constant("two", exponent), elementwise("power", ["d", "two"], "p")]
    else:
        nodes += [elementwise("multiply", ["d", "d"], "p")]
    nodes += [*mean("p", "v"), constant("eps", 1e-5)]
    if eps_after_sqrt:
        nodes += [elementwise("sqrt", ["v"], "r", 1), elementwise("add", ["r", "eps"], "s")]
    else:
        nodes += [elementwise("add", ["v", "eps"], "ve"), elementwise("sqrt", ["ve"], "s", 1)]
    nodes += [elementwise("divide", ["d", "s"], "n")]
    last, inputs = "n", ["x"]
    if scale:
        nodes += [elementwise("multiply", [last, "w"], "nw")]
        last, inputs = "nw", inputs + ["w"]
    if bias:
        nodes += [elementwise("add", [last, "b"], "y")]
        last, inputs = "y", inputs + ["b"]
    shapes = {"x": shape, "m": rows_kept, "d": shape, "p": shape, "v": rows_kept, "ve": rows_kept, "r": rows_kept,
              "s": rows_kept, "n": shape, "nw": shape, "y": shape, "w": (width,), "b": (width,), "two": (),
              "eps": ()}
    flat = tuple(d for i, d in enumerate(shape) if i != dim % len(shape))
    shapes.update({"m_flat": flat, "v_flat": flat})
    operands = {name: OperandInfo(name, value, "float32") for name, value in shapes.items()}
    return ModelIR(nodes, operands, inputs, [last, "m"] if mean_output else [last], "onnx_layer_norm")


@pytest.mark.parametrize("square, keepdim", [("power", True), ("product", True), ("power", False)])
@pytest.mark.parametrize("scale, bias", [(True, True), (True, False), (False, True), (False, False)])
def test_onnx_layer_norm_spelling_becomes_one_op(square, keepdim, scale, bias):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((2, 3, 8)) * 2 + 3).astype(np.float32)
    x[0, 2, 5] = np.nan
    weights = [rng.standard_normal(8).astype(np.float32) for present in (scale, bias) if present]
    ir = onnx_layer_norm_graph(square=square, scale=scale, bias=bias, keepdim=keepdim)
    model = build(ir, "numpy")
    assert _step_types(model) == ["LayerNorm"]  # the constants it read are left unread, and dropped
    assert "fast_variance" not in model.steps[-1].node.params
    got = model(x, *weights)
    np.testing.assert_allclose(got, build(ir, "numpy", fuse=False)(x, *weights), rtol=2e-6, atol=2e-6)
    w = weights[0] if scale else 1.0
    b = weights[-1] if bias else 0.0
    np.testing.assert_allclose(got, two_pass_layer_norm_reference(x, w, b, 1e-5), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("change", [{"dim": 1}, {"shape": (2, 8, 8), "dim": 1, "keepdim": False},
                                    {"exponent": 4.0}, {"eps_after_sqrt": True}, {"mean_output": True}],
                         ids=["other_axis", "other_axis_reshaped_to_rows", "fourth_power", "eps_after_sqrt",
                              "mean_is_an_output"])
def test_onnx_layer_norm_spellings_that_differ_stay_as_written(change):
    rng = np.random.default_rng(9)
    x = rng.standard_normal(change.get("shape", (2, 3, 8))).astype(np.float32)
    weights = [rng.standard_normal(8).astype(np.float32) for _ in range(2)]
    ir = onnx_layer_norm_graph(**change)
    model = build(ir, "numpy")
    assert "LayerNorm" not in _step_types(model)
    got, expected = model(x, *weights), build(ir, "numpy", fuse=False)(x, *weights)
    for mine, theirs in zip(*[(g,) if isinstance(g, np.ndarray) else g for g in (got, expected)]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-6)


# -- softmax ------------------------------------------------------------------------------------------------


def softmax_input(rng, shape=(2, 3, 8)) -> np.ndarray:
    """Ordinary rows, a row of large values, a masked row (-inf entries), a row all -inf, rows with NaN and +inf."""
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows[1] += 1e4
    rows[2, ::2] = -np.inf
    rows[3] = -np.inf
    rows[4, 1] = np.nan
    rows[5, 3] = np.inf
    return x


@pytest.mark.parametrize("text, log", [(JAX_SOFTMAX, False), (JAX_LOG_SOFTMAX, True)], ids=["softmax", "log_softmax"])
def test_jax_softmax_and_log_softmax_become_one_op(text, log):
    x = softmax_input(np.random.default_rng(5))
    model, got, unrewritten = _both(text, x)
    assert _step_types(model) == ["Softmax"]
    assert model.steps[0].node.params == ({"dim": -1, "log": True} if log else {"dim": -1})
    # log-softmax's float32 x - max rounds at |x|'s scale (up to ~16 here: 1e-6), whatever its result
    atol = 2e-6 if log else 1e-7
    np.testing.assert_allclose(got, unrewritten, rtol=2e-6, atol=atol)
    np.testing.assert_allclose(got, softmax_reference(x, log), rtol=2e-6, atol=atol)
    assert np.isnan(got[1]).all() and not np.isnan(got[0, :3]).any()  # all -inf, NaN and +inf rows: NaN


@pytest.mark.parametrize("log", [False, True])
def test_a_large_softmax_becomes_one_op_and_matches(log):
    # 16384 elements: large enough for the oneDNN kernel where it is installed.
    x = softmax_input(np.random.default_rng(6), (4, 64, 64))
    model, got, unrewritten = _both(softmax_text((4, 64, 64), log=log), x)
    assert _step_types(model) == ["Softmax"]
    atol = 2e-6 if log else 1e-7  # as above
    np.testing.assert_allclose(got, unrewritten, rtol=2e-6, atol=atol)
    np.testing.assert_allclose(got, softmax_reference(x, log), rtol=2e-6, atol=atol)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("change", [{"axis": 1}, {"shape": (2, 8, 8), "axis": 1, "spread": 2}, {"exp_output": True},
                                    {"shift_other": True}],
                         ids=["other_axis", "other_axis_spread_along_last", "exp_is_an_output", "max_of_another_tensor"])
def test_softmax_chains_that_differ_stay_as_written(change, log):
    rng = np.random.default_rng(7)
    shape = change.get("shape", (2, 3, 8))
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2 if "shift_other" in change else 1)]
    model, got, unrewritten = _both(softmax_text(log=log, **change), *arrays)
    assert "Softmax" not in _step_types(model)
    for mine, theirs in zip(*[(g,) if isinstance(g, np.ndarray) else g for g in (got, unrewritten)]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-7)
