"""Transposes move below window reductions and join (kuiper/graph/transposes.py): the same values,
fewer transposes, and a pool that reads its input where it lies."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper

MAXIMUM = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\n"

# JAX's conv -> ReLU -> 2x2 max pool -> conv, NHWC, as jax.jit lowers it: the pool's window
# is over dims 1 and 2 of the transposed (NCHW -> NHWC) conv output, with uneven padding.
CONV_POOL_CONV = MAXIMUM + """ENTRY main {
  x = f32[2,8,8,3] parameter(0)
  k1 = f32[3,3,3,4] parameter(1)
  c1 = f32[2,8,8,4] convolution(x, k1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[2,8,8,4] broadcast(zero), dimensions={}
  r1 = f32[2,8,8,4] maximum(c1, zeros)
  low = f32[] constant(-inf)
  pool = f32[2,4,5,4] reduce-window(r1, low), window={size=1x2x3x1 stride=1x2x2x1 pad=0_0x0_0x1_2x0_0}, to_apply=max
  k2 = f32[3,3,4,5] parameter(2)
  ROOT c2 = f32[2,4,5,5] convolution(pool, k2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


def _arguments():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 8, 8, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 4)).astype(np.float32),
            rng.standard_normal((3, 3, 4, 5)).astype(np.float32))


def _types(model):
    return [step.node.type for step in model.steps]


@pytest.mark.parametrize("low, pool_type", [("-inf", "MaxPool2d"), ("0", "ReduceWindow")],
                         ids=["a max pool (the frontend's MaxPool2d)", "windows from 0 (a ReduceWindow)"])
def test_a_pool_between_convs_reads_the_conv_output_and_the_transposes_between_them_cancel(low, pool_type):
    program = CONV_POOL_CONV.replace("constant(-inf)", f"constant({low})")
    model = kuiper.load_hlo(program, backend="numpy")
    unfused = kuiper.load_hlo(program, backend="numpy", fuse=False)
    made_by = {operand: step.node for step in model.steps for operand in step.node.outputs}
    first_conv, second_conv = [step.node for step in model.steps if step.node.type == "Conv"]
    pool = made_by[second_conv.inputs[0]]
    assert pool.type == pool_type  # NCHW from the first conv to the second: no transpose between
    reader = made_by[pool.inputs[0]]  # the ReLU, or the conv that took it as its epilogue (numba_kernels/conv.py)
    assert reader is first_conv and first_conv.params.get("epilogue_members") == ["r1"] or (
        made_by[reader.inputs[0]] is first_conv)
    assert _types(model).count("Transpose") < _types(unfused).count("Transpose")
    arguments = _arguments()
    x = arguments[0]
    x[0, 3, 3, 1] = np.nan  # a NaN reaches the pool: the max keeps it wherever it folds it
    for _ in range(2):
        got = model(*arguments)
        np.testing.assert_array_equal(got, unfused(*arguments))


TWO_TRANSPOSES = """HloModule transposes

ENTRY main {
  x = f32[2,3,4,5] parameter(0)
  a = f32[4,2,5,3] transpose(x), dimensions={2,0,3,1}
  b = f32[3,2,4,5] transpose(a), dimensions={3,1,0,2}
  back = f32[2,3,4,5] transpose(b), dimensions={1,0,2,3}
  ROOT out = (f32[3,2,4,5], f32[2,3,4,5]) tuple(b, back)
}
"""


def test_transposes_of_transposes_join_and_an_identity_leaves():
    model = kuiper.load_hlo(TWO_TRANSPOSES, backend="numpy")
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    b = x.transpose(2, 0, 3, 1).transpose(3, 1, 0, 2)
    got_b, got_back = model(x)
    np.testing.assert_array_equal(got_b, b)
    np.testing.assert_array_equal(got_back, x)  # back undoes a and b
    # a and b joined into one; back joined with them is the identity, kept as the model's output
    assert _types(model).count("Transpose") == 2
