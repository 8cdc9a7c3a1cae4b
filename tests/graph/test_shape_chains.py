"""Reshapes and broadcasts that change nothing leave the plan (kuiper/graph/shape_chains.py), and the
results stay those of the ops as written (checked against NumPy)."""

from __future__ import annotations

import numpy as np

import kuiper

# JAX's bias add: reshape to (1, n), broadcast to the same shape, reshape back, broadcast to (rows, n);
# then a reshape of a reshape, and a model output that is an unchanged reshape of its input.
TEXT = """HloModule bias
ENTRY main {
  x = f32[4,6] parameter(0)
  b = f32[6] parameter(1)
  r1 = f32[1,6] reshape(b)
  same = f32[1,6] broadcast(r1), dimensions={0,1}
  back = f32[6] reshape(same)
  wide = f32[4,6] broadcast(back), dimensions={1}
  sum = f32[4,6] add(x, wide)
  flat = f32[24] reshape(sum)
  grid = f32[2,12] reshape(flat)
  kept = f32[6] reshape(b)
  ROOT out = (f32[2,12], f32[6]) tuple(grid, kept)
}
"""


def test_shape_ops_that_change_nothing_leave_and_the_results_stay():
    model = kuiper.load_hlo(TEXT)
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    grid, kept = model(x, b)
    np.testing.assert_array_equal(grid, (x + b).reshape(2, 12))
    np.testing.assert_array_equal(kept, b)
    assert kept is not b  # a model output that is an input unchanged is still an op's result
    names = [step.node.name for step in model.steps]
    assert not {"r1", "same", "back", "flat"} & set(names)  # the no-ops and the chain's first link
    assert {"wide", "grid", "kept"} <= set(names)


def test_a_broadcast_that_moves_dims_is_not_dropped():
    text = """HloModule moved
ENTRY main {
  x = f32[3,3] parameter(0)
  ROOT t = f32[3,3] broadcast(x), dimensions={1,0}
}
"""
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(kuiper.load_hlo(text)(x), x.T)
