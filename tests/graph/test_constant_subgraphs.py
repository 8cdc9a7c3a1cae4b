"""Values computed exactly from constants alone are computed once, at build time
(kuiper/graph/constant_subgraphs.py): JAX's causal mask (iotas, broadcasts, compares, a convert) becomes
one boolean Constant, with the program's results bit for bit as built without the graph passes; float
math on constants, a float value a later op reads, and values over the size limit stay ops."""

from __future__ import annotations

import numpy as np

import kuiper
from kuiper.graph.constant_subgraphs import MAX_FOLDED_BYTES

CAUSAL = """HloModule causal

ENTRY main {{
  scores = f32[1,2,{t},{t}] parameter(0)
  iota = s32[{t}] iota(), iota_dimension=0
  rows = s32[1,{t},1] reshape(iota)
  row_ids = s32[1,{t},{t}] broadcast(rows), dimensions={{0,1,2}}
  columns = s32[1,1,{t}] reshape(iota)
  column_ids = s32[1,{t},{t}] broadcast(columns), dimensions={{0,1,2}}
  allowed = pred[1,{t},{t}] compare(row_ids, column_ids), direction=GE
  as_float = f32[1,{t},{t}] convert(allowed)
  zero = f32[] constant(0)
  zeros = f32[1,{t},{t}] broadcast(zero), dimensions={{}}
  mask = pred[1,{t},{t}] compare(as_float, zeros), direction=NE
  heads = pred[1,2,{t},{t}] broadcast(mask), dimensions={{0,2,3}}
  low = f32[] constant(-1e+30)
  lows = f32[1,2,{t},{t}] broadcast(low), dimensions={{}}
  ROOT out = f32[1,2,{t},{t}] select(heads, scores, lows)
}}
"""

FLOAT_MATH = """HloModule float_math

ENTRY main {
  x = f32[8] parameter(0)
  iota = s32[8] iota(), iota_dimension=0
  as_float = f32[8] convert(iota)
  grown = f32[8] exponential(as_float)
  ten = f32[] constant(10)
  tens = f32[8] broadcast(ten), dimensions={}
  large = pred[8] compare(grown, tens), direction=GT
  zero = f32[] constant(0)
  zeros = f32[8] broadcast(zero), dimensions={}
  ROOT out = f32[8] select(large, x, zeros)
}
"""

FLOAT_READ = """HloModule float_read

ENTRY main {
  x = f32[8] parameter(0)
  iota = s32[8] iota(), iota_dimension=0
  as_float = f32[8] convert(iota)
  ROOT out = f32[8] multiply(x, as_float)
}
"""


def types(model) -> list[str]:
    return [step.node.type for step in model.steps]


def test_a_causal_mask_is_one_constant_and_the_results_keep_their_bits():
    text = CAUSAL.format(t=16)
    model = kuiper.load_hlo(text, backend="numpy")
    unfused = kuiper.load_hlo(text, backend="numpy", fuse=False)
    assert "Iota" not in types(model) and "Broadcast" not in types(model)
    (constant,) = [step for step in model.steps if step.node.type == "Constant" and step.op.value.dtype == np.bool_]
    assert constant.op.value.shape == (1, 2, 16, 16)
    np.testing.assert_array_equal(constant.op.value[0, 1], np.tril(np.ones((16, 16), bool)))
    scores = np.random.default_rng(0).standard_normal((1, 2, 16, 16)).astype(np.float32)
    for _ in range(2):
        got = np.asarray(model(scores))
        np.testing.assert_array_equal(got, unfused(scores))
    np.testing.assert_array_equal(got, np.where(np.tril(np.ones((16, 16), bool)), scores, np.float32(-1e30)))


def test_float_math_on_constants_stays_for_the_run_time_kernels():
    """exp(iota) > 10 is not folded: the host's exp need not give the run-time kernel's bits."""
    model = kuiper.load_hlo(FLOAT_MATH, backend="numpy")
    assert not any(step.node.type == "Constant" and step.op.value.dtype == np.bool_ for step in model.steps)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_array_equal(model(x), kuiper.load_hlo(FLOAT_MATH, backend="numpy", fuse=False)(x))
    np.testing.assert_array_equal(model(x), np.where(np.exp(np.arange(8.0)) > 10, x, 0))


def test_a_float_value_read_by_a_run_time_op_stays_an_op():
    model = kuiper.load_hlo(FLOAT_READ, backend="numpy")
    assert not any(step.node.type == "Constant" and step.op.value.dtype == np.float32 and step.op.value.size == 8
                   for step in model.steps)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_array_equal(model(x), x * np.arange(8, dtype=np.float32))


def test_a_mask_over_the_size_limit_is_computed_at_run_time():
    text = CAUSAL.format(t=1024)  # (1, 1024, 1024) int32 ids: 4 MiB each, over MAX_FOLDED_BYTES
    model = kuiper.load_hlo(text, backend="numpy")
    constants = [step.op.value for step in model.steps if step.node.type == "Constant"]
    assert max(value.nbytes for value in constants) <= MAX_FOLDED_BYTES  # the iota itself, and scalars
    assert "Broadcast" in types(model)
    scores = np.random.default_rng(1).standard_normal((1, 2, 1024, 1024)).astype(np.float32)
    np.testing.assert_array_equal(model(scores), np.where(np.tril(np.ones((1024, 1024), bool)), scores,
                                                          np.float32(-1e30)))
