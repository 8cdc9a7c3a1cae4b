"""Slices that partition one dim of one value become one Split step (kuiper/graph/slice_groups.py)."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.graph.slice_groups import join_slices
from kuiper.model_ir import OperandInfo, OpNode

GATES = """HloModule gates

ENTRY main {
  z = f32[2,12] parameter(0)
  g2 = f32[2,3] slice(z), slice={[0:2], [6:9]}
  g0 = f32[2,3] slice(z), slice={[0:2], [0:3]}
  g3 = f32[2,3] slice(z), slice={[0:2], [9:12]}
  g1 = f32[2,3] slice(z), slice={[0:2], [3:6]}
  a = f32[2,3] multiply(g0, g1)
  b = f32[2,3] subtract(g2, g3)
  ROOT r = (f32[2,3], f32[2,3], f32[2,3]) tuple(a, b, g1)
}
"""


def test_slices_that_partition_a_dim_run_as_one_split_with_the_slices_values():
    model = kuiper.load_hlo(GATES, backend="numpy")
    assert [step.node.type for step in model.steps].count("Split") == 1
    assert "Slice" not in [step.node.type for step in model.steps]
    z = np.arange(24, dtype=np.float32).reshape(2, 12) - 7
    for rows in (z, z[:1], z):  # another batch: the specialized split hands it to the forward
        a, b, g1 = model(rows)
        np.testing.assert_array_equal(a, rows[:, 0:3] * rows[:, 3:6])
        np.testing.assert_array_equal(b, rows[:, 6:9] - rows[:, 9:12])
        np.testing.assert_array_equal(g1, rows[:, 3:6])


def _slice(name, source, starts, limits, strides=None):
    params = {"starts": starts, "limits": limits}
    if strides is not None:
        params["strides"] = strides
    return OpNode(type="Slice", name=name, inputs=[source], outputs=[f"{name}.out"], params=params)


OPERANDS = {"x": OperandInfo("x", (2, 12), "float32")}


def test_the_split_stands_where_the_first_slice_stood_with_its_pieces_in_order():
    order = [_slice("c", "x", [0, 8], [2, 12]), OpNode(type="Abs", name="other", inputs=["x"], outputs=["y"]),
             _slice("a", "x", [0, 0], [2, 5]), _slice("b", "x", [0, 5], [2, 8])]
    joined = join_slices(order, OPERANDS)
    assert [node.type for node in joined] == ["Split", "Abs"]
    split = joined[0]
    assert split.inputs == ["x"] and split.outputs == ["a.out", "b.out", "c.out"]
    assert split.params == {"split_size_or_sections": [5, 3, 4], "dim": 1}


@pytest.mark.parametrize("case, slices", [
    ("a gap", [([0, 0], [2, 5]), ([0, 6], [2, 12])]),
    ("an overlap", [([0, 0], [2, 6]), ([0, 5], [2, 12])]),
    ("short of the end", [([0, 0], [2, 5]), ([0, 5], [2, 11])]),
    ("two dims cut", [([0, 0], [1, 6]), ([0, 6], [2, 12])]),
    ("one slice", [([0, 0], [2, 12])]),
])
def test_slices_that_do_not_partition_one_dim_stay(case, slices):
    order = [_slice(f"s{k}", "x", starts, limits) for k, (starts, limits) in enumerate(slices)]
    assert join_slices(order, OPERANDS) == order, case


def test_strided_slices_and_slices_of_an_unknown_shape_stay():
    strided = [_slice("a", "x", [0, 0], [2, 6], [1, 2]), _slice("b", "x", [0, 6], [2, 12], [1, 1])]
    assert join_slices(strided, OPERANDS) == strided
    unknown = [_slice("a", "y", [0, 0], [2, 6]), _slice("b", "y", [0, 6], [2, 12])]
    assert join_slices(unknown, {"y": OperandInfo("y", (None, 12), "float32")}) == unknown
    assert join_slices(unknown, {}) == unknown
