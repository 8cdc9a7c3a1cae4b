"""A named Reduce over axes of size 1 only is its one element combined with the init (kuiper/ops/reduce.py,
``Reduce.specialized``): after the first call the step runs that directly, giving the forward's bits, NaN,
-0.0 and integer wrap included; other inputs go back to the forward."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.graph import build
from kuiper.model_ir import OpNode

from single_op import graph


def reduce_model(reducer: str, axes):
    node = OpNode("Reduce", "op", ["x", "init"], ["out"], {"axes": list(axes), "reducer": reducer})
    return build(graph([node], ["x", "init"], ["out"]), backend="numpy")


VALUES = {
    "float32": np.array([[1.5], [-0.0], [np.nan], [-np.inf], [3e38]], np.float32),
    "int32": np.array([[7], [-3], [2**31 - 1], [0], [-(2**31)]], np.int32),
    "bool": np.array([[True], [False], [True], [False], [True]]),
}
INITS = {"float32": np.float32(2.5), "int32": np.int32(5), "bool": np.bool_(True)}


@pytest.mark.parametrize("reducer", ["add", "mul", "max", "min", "and", "or"])
@pytest.mark.parametrize("dtype", list(VALUES))
def test_a_reduction_over_size_one_axes_gives_the_forwards_bits(reducer, dtype):
    if reducer in ("and", "or") and dtype == "float32":
        pytest.skip("bitwise reducers take integers and booleans")
    x = VALUES[dtype].reshape(1, 5, 1)
    init = np.asarray(INITS[dtype])
    model = reduce_model(reducer, [0, 2])
    (step,) = model.steps
    with np.errstate(all="ignore"):
        want = step.op.forward(x, init)
        for _ in range(3):  # the first call, then the specialized step
            got = model(x, init, to_numpy=True)
            assert got.dtype == want.dtype and got.shape == want.shape == (5,)
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert model.plan.specialized_count() == 1


def test_axes_longer_than_one_keep_the_reduction():
    """Over an axis longer than one the step stays a reduction: the array's own (``_as_array_reduction``,
    the forward's bits), not the one-element combine."""
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    model = reduce_model("add", [2])
    (step,) = model.steps
    for _ in range(3):
        got = model(x, np.asarray(np.float32(0)), to_numpy=True)
        np.testing.assert_array_equal(got, [[3.0, 12.0]])
        np.testing.assert_array_equal(got, step.op.forward(x, np.asarray(np.float32(0))))
    assert model.plan.specialized_count() == 1
