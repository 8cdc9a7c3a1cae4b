"""A split's specialized forward (kuiper/ops/concat.py, ``SplitOp.specialized``): the pieces forward gives,
as views of the input, taken by one ``operator.itemgetter`` call; other shapes go to forward."""

from __future__ import annotations

import operator

import numpy as np

from kuiper.graph import build
from kuiper.model_ir import OpNode

from single_op import graph


def split_model(sections, dim):
    outputs = [f"piece{i}" for i in range(len(sections))]
    node = OpNode("Split", "split", ["x"], outputs, {"split_size_or_sections": list(sections), "dim": dim})
    return build(graph([node], ["x"], outputs), backend="numpy")


def test_the_specialized_split_gives_forwards_pieces_as_views_in_one_call():
    model = split_model([128, 128, 128, 128], 1)  # an LSTM's four gates out of one (1, 512) product
    x = np.arange(512, dtype=np.float32).reshape(1, 512)
    first = model(x)
    (step,) = model.steps
    fast = model.plan.entries[0][0]
    assert fast is not step.op.forward
    assert any(isinstance(cell.cell_contents, operator.itemgetter) for cell in fast.__closure__)
    y = x + 1
    pieces = model(y)
    for index, (piece, before) in enumerate(zip(pieces, first)):
        np.testing.assert_array_equal(piece, y[:, 128 * index:128 * (index + 1)])
        np.testing.assert_array_equal(before, x[:, 128 * index:128 * (index + 1)])
    direct = fast(y)
    assert isinstance(direct, tuple) and len(direct) == 4 and all(np.shares_memory(piece, y) for piece in direct)
    # another shape: forward's pieces, and its checks
    z = np.arange(1024, dtype=np.float32).reshape(2, 512)
    for index, piece in enumerate(model(z)):
        np.testing.assert_array_equal(piece, z[:, 128 * index:128 * (index + 1)])


def test_uneven_pieces_along_the_first_dim():
    model = split_model([1, 3, 2], 0)
    x = np.arange(24, dtype=np.int64).reshape(6, 4)
    model(x)
    a, b, c = model(x * 2)
    np.testing.assert_array_equal(a, x[:1] * 2)
    np.testing.assert_array_equal(b, x[1:4] * 2)
    np.testing.assert_array_equal(c, x[4:] * 2)
