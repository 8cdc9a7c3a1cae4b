"""Elementwise functions of one input move above reshapes and permutes (kuiper/graph/hoist.py).

YOLO's detection head is conv -> reshape -> permute -> sigmoid; moved up, the sigmoid reads the
conv's output and becomes its epilogue.  The order of the built steps shows the move; the
numbers must be those of the ops as written: against a float64 NumPy reference and ``fuse=False``.
"""

from __future__ import annotations

import numpy as np

import kuiper

from conftest import param_text, write_model

RNG = np.random.default_rng(3)
WEIGHT = (RNG.standard_normal((6, 4, 1, 1)) / 2).astype(np.float32)
BIAS = RNG.standard_normal(6).astype(np.float32)
WEIGHTS = {"c.weight": WEIGHT.tobytes(), "c.bias": BIAS.tobytes()}
X = RNG.standard_normal((1, 4, 5, 7)).astype(np.float32)

CONV = ("nn.Conv2d c 1 1 x a bias=True kernel_size=(1,1) in_channels=4 out_channels=6 "
        "@weight=(6,4,1,1)f32 @bias=(6)f32")
HEAD = f"""
pnnx.Input in0 0 1 x #x=(1,4,5,7)f32
{CONV}
Tensor.reshape v 1 1 a b shape=(1,2,3,5,7)
Tensor.permute p 1 1 b d dims=(0,1,3,4,2)
F.sigmoid s 1 1 d e
pnnx.Output out 1 0 e
"""


def _load(tmp_path, body, **options):
    return kuiper.load(write_model(tmp_path, param_text(body), WEIGHTS), **options)


def _head64(x):
    conv = np.einsum("oc,nchw->nohw", WEIGHT[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    conv += BIAS.astype(np.float64)[None, :, None, None]
    return np.transpose(conv.reshape(1, 2, 3, 5, 7), (0, 1, 3, 4, 2))


def _names(model) -> list[str]:
    """The built steps' op names, an op that took an epilogue followed by its members."""
    names = []
    for step in model.steps:
        names.append(step.node.name)
        names.extend(step.node.params.get("epilogue_members", []))
        names.extend(step.node.params.get("members", []) if step.node.type == "kuiper.Elementwise" else [])
    return names


def test_a_sigmoid_after_a_reshape_and_a_permute_moves_up_to_the_conv(tmp_path):
    model = _load(tmp_path, HEAD)
    names = _names(model)
    assert names.index("s") < names.index("v") < names.index("p")  # the sigmoid runs first
    got = model(X)
    want = 1.0 / (1.0 + np.exp(-_head64(X)))
    assert got.shape == (1, 2, 5, 7, 3)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    unfused = _load(tmp_path, HEAD, fuse=False)
    assert _names(unfused) == ["c", "v", "p", "s"]  # as written
    np.testing.assert_allclose(unfused(X), want, rtol=2e-6, atol=1e-7)


def test_it_stays_where_another_op_reads_what_it_would_move_past(tmp_path):
    shared = HEAD.replace("pnnx.Output out 1 0 e", "F.relu r 1 1 d f\npnnx.Output out 2 0 e f")
    model = _load(tmp_path, shared)
    names = _names(model)
    assert names.index("p") < names.index("s")  # the permuted view has two readers: nothing moves
    sigmoid, relu = model(X)
    np.testing.assert_allclose(sigmoid, 1.0 / (1.0 + np.exp(-_head64(X))), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(relu, np.maximum(_head64(X), 0.0), rtol=2e-6, atol=1e-7)


def test_it_stays_below_a_model_output_and_a_function_of_two_inputs_stays(tmp_path):
    exposed = HEAD.replace("pnnx.Output out 1 0 e", "pnnx.Output out 2 0 e b")
    model = _load(tmp_path, exposed)
    names = _names(model)
    assert names.index("v") < names.index("s")  # the reshape's output is returned: the reshape stays first
    got, reshaped = model(X)
    np.testing.assert_allclose(reshaped, _head64(X).transpose(0, 1, 4, 2, 3), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(got, 1.0 / (1.0 + np.exp(-_head64(X))), rtol=2e-6, atol=1e-7)

    two_inputs = HEAD.replace("F.sigmoid s 1 1 d e", "pnnx.Expression s 2 1 d d e expr=mul(@0,@1)")
    model = _load(tmp_path, two_inputs)
    names = _names(model)
    assert names.index("p") < names.index("s")
    np.testing.assert_allclose(model(X), _head64(X) ** 2, rtol=2e-6, atol=1e-6)
