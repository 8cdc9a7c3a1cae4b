"""addcmul/addcdiv on hand-made one-op models against the PyTorch docs' formulas in float64.

The fixture new_ops_norm_addcmul_arange checks the same ops against PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper

from conftest import param_text, write_model
from test_ops_activation import one_op


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_addcmul_and_addcdiv(tmp_path):
    a, b, c = rand((2, 3), 6), rand((2, 3), 7), rand((1, 3), 8) + 3
    (got,), _ = one_op(tmp_path, "torch.addcmul", [a, b, c], {"value": 0.5}, keys=["input", "tensor1", "tensor2"])
    np.testing.assert_allclose(got, a + 0.5 * b * c, atol=1e-6)
    (got,), _ = one_op(tmp_path, "torch.addcdiv", [a, b, c], {"value": -2.0}, keys=["input", "tensor1", "tensor2"])
    np.testing.assert_allclose(got, a - 2.0 * b / c, atol=1e-5)
    (got,), _ = one_op(tmp_path, "aten::addcmul", [a, b, c, np.float32(0.25)])
    np.testing.assert_allclose(got, a + 0.25 * b * c, atol=1e-6)


CHAINS = {
    "addcmul, value param": ("torch.addcmul op 3 1 a b c p $input=a $tensor1=b $tensor2=c value=0.5",
                             lambda a, b, c: a + 0.5 * b * c),
    "addcdiv, value param": ("torch.addcdiv op 3 1 a b c p $input=a $tensor1=b $tensor2=c value=-2.0",
                             lambda a, b, c: a - 2.0 * b / c),
    "aten::addcmul, value input": ("pnnx.Expression v 0 1 v expr=0.25\naten::addcmul op 4 1 a b c v p",
                                   lambda a, b, c: a + 0.25 * b * c),
    "tensors bound out of order": ("torch.addcmul op 3 1 c b a p $tensor2=c $tensor1=b $input=a",
                                   lambda a, b, c: a + b * c),
}


@pytest.mark.parametrize("case", list(CHAINS))
def test_addcmul_fuses_with_the_ops_around_it_and_computes_the_same(tmp_path, case):
    line, formula = CHAINS[case]
    body = f"""
pnnx.Input in0 0 1 a
pnnx.Input in1 0 1 b
pnnx.Input in2 0 1 c
{line}
pnnx.Expression out 2 1 p a y expr=mul(@0,@1)
pnnx.Output output 1 0 y
"""
    model = kuiper.load(write_model(tmp_path, param_text(body)))
    assert [step.node.type for step in model.steps] == ["kuiper.Elementwise"]
    a, b, c = rand((2, 3, 4), 1), rand((2, 3, 4), 2), rand((1, 3, 1), 3) + 3
    expected = formula(*(v.astype(np.float64) for v in (a, b, c))) * a
    np.testing.assert_allclose(model(a, b, c), expected, rtol=1e-5, atol=1e-6)
