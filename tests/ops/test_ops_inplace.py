"""Tensor.index_put, Tensor.fill and Tensor.masked_fill beyond their PyTorch fixtures.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (an index
tensor on dim 1, a fill value given as an input) against hand-written values.
"""

import numpy as np
import pytest
from conftest import write_model

import kuiper


def _graph(tmp_path, inputs, lines, outputs, name):
    body = [f"pnnx.Input in{i} 0 1 {n}" for i, n in enumerate(inputs)] + lines
    body += [f"pnnx.Output out{i} 1 0 {n}" for i, n in enumerate(outputs)]
    operands = {token for line in body for token in line.split()[4:] if "=" not in token}
    text = f"7767517\n{len(body)} {len(operands)}\n" + "\n".join(body) + "\n"
    return kuiper.load(write_model(tmp_path, text, name=name))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_an_index_tensor_on_dim_1(tmp_path, accumulate):
    # x[:, rows] = 1.0 (or +=): pnnx writes the index list as the expression [None,@0].
    model = _graph(tmp_path, ["x", "rows"], [
        "pnnx.Expression e 1 1 rows l expr=[None,@0]",
        f"Tensor.index_put p 2 1 x l y accumulate={accumulate} values=1.5 $input=x $indices=l",
    ], ["y"], name=f"ip{accumulate}")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    rows = np.array([0, 2, 0], np.int64)
    want = x.copy()
    if accumulate:
        np.add.at(want, (slice(None), rows), 1.5)
    else:
        want[:, rows] = 1.5
    np.testing.assert_array_equal(model(x, rows), want)
    np.testing.assert_array_equal(x, np.arange(24, dtype=np.float32).reshape(2, 3, 4))  # input untouched


def test_fill_and_masked_fill_take_the_value_from_an_input(tmp_path):
    model = _graph(tmp_path, ["x", "v"], [
        "Tensor.fill f 2 1 x v a $input=x $value=v",
        "torch.gt g 1 1 x m other=0.0 $input=x",
        "Tensor.masked_fill k 3 1 x m v b $input=x $mask=m $value=v",
    ], ["a", "b"], name="fills")
    x = np.array([[-1.0, 2.0, 0.5]], np.float32)
    filled, masked = model(x, np.array(7.0, np.float32))
    np.testing.assert_array_equal(filled, np.full_like(x, 7.0))
    np.testing.assert_array_equal(masked, [[-1.0, 7.0, 7.0]])
