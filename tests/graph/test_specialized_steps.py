"""Specialized steps (``Op.specialized``, kuiper/graph/plan.py): after its first call a model runs faster
forwards, which must give exactly what the ops' own forwards give, for inputs like the first call's
and for any others (another batch, another dtype), and must never hide a forward replaced later.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.graph import StepObserver

from conftest import MODELS, reference_batches

PNNX_FIXTURES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())
HLO = Path(__file__).parents[1] / "fixtures" / "hlo"
HLO_PROGRAMS = sorted(path.name[: -len(".npz")] for path in HLO.glob("*.npz"))


def _forwards_only(model, *inputs):
    """A call through every op's own forward: the plan specializes again at each call, and its
    specializing run calls ``forward``."""
    model.plan._specialized_at = None
    return model(*inputs)


def _specialized_count(model) -> int:
    return model.plan.specialized_count()


def _outputs(value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _same(got, want, where):
    for index, (g, w) in enumerate(zip(_outputs(got), _outputs(want))):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{where} output {index}"
        assert type(g) is type(w), f"{where} output {index}: {type(g).__name__} for {type(w).__name__}"
        np.testing.assert_array_equal(g, w, err_msg=f"{where} output {index}")


def _hlo_inputs(name):
    data = np.load(HLO / f"{name}.npz")
    return [data[f"input{i}"] for i in range(sum(key.startswith("input") for key in data.files))]


def test_specialized_calls_give_exactly_what_the_forwards_give_on_every_fixture():
    specialized = 0
    for name in PNNX_FIXTURES:
        batches = [data["inputs"] for _, data in sorted(reference_batches(name).items())]
        fast = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
        plain = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
        # The first batch specializes; it runs again specialized; another batch meets the guards
        # (shapes change), and the first comes back.
        for step, inputs in enumerate([batches[0], batches[0], *batches[1:], batches[0]]):
            _same(fast(*inputs), _forwards_only(plain, *inputs), f"{name} call {step}")
        specialized += _specialized_count(fast)
    for name in HLO_PROGRAMS:
        fast = kuiper.load(HLO / f"{name}.opt.hlo.txt", backend="numpy")
        plain = kuiper.load(HLO / f"{name}.opt.hlo.txt", backend="numpy")
        inputs = _hlo_inputs(name)
        for step in range(2):
            _same(fast(*inputs), _forwards_only(plain, *inputs), f"{name}.opt.hlo.txt call {step}")
        specialized += _specialized_count(fast)
    assert specialized > 300, f"only {specialized} steps were specialized: the fast paths are not taken"


ADD_THEN_RESHAPE = """HloModule add_reshape

ENTRY main {
  a = f32[2,6] parameter(0)
  b = f32[2,6] parameter(1)
  sum = f32[2,6] add(a, b)
  ROOT r = f32[3,4] reshape(sum)
}
"""


def _entry(model, op_type):
    (index,) = [i for i, step in enumerate(model.steps) if step.node.type == op_type]
    return model.plan.entries[index][0], model.steps[index].op


def test_a_specialized_step_given_other_dtypes_or_shapes_runs_the_ops_forward():
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    a, b = np.arange(12, dtype=np.float32).reshape(2, 6), np.ones((2, 6), np.float32)
    np.testing.assert_array_equal(model(a, b), (a + b).reshape(3, 4))
    add, add_op = _entry(model, "Elementwise")
    # float32 + float32 of any shape: the ufunc itself, behind the dtype guards
    assert any(cell.cell_contents is np.add for cell in add.__closure__)
    np.testing.assert_array_equal(add(a, b[:1]), a + b[:1])  # broadcasting, as the op does
    reshape, reshape_op = _entry(model, "Reshape")
    assert getattr(reshape, "__self__", None) is not reshape_op
    # Inputs unlike the first call's: the guards hand them to forward, which gives its own answer.
    wide = np.arange(12, dtype=np.float64).reshape(2, 6)
    _same(add(wide, wide), add_op.forward(wide, wide), "float64 into an add specialized for float32")
    np.testing.assert_array_equal(reshape(wide), wide.reshape(3, 4))
    other = np.arange(24, dtype=np.float32).reshape(4, 6)
    with pytest.raises(kuiper.KuiperError, match="shape"):
        reshape(other)  # 24 elements into (3, 4): forward's error, not a silent reshape to another shape
    np.testing.assert_array_equal(reshape(a), a.reshape(3, 4))


def test_a_specialized_step_of_0_d_arrays_gives_an_array():
    # A ufunc of 0-d arrays returns a NumPy scalar: the specialized add must still give a 0-d array.
    for root, want in (("add(a, b)", 5), ("maximum(a, zero)", 2)):  # a ufunc, and a clip (ReLU)
        text = ("HloModule scalar\n\nENTRY main {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                f"  zero = f32[] constant(0)\n  ROOT result = f32[] {root}\n}}\n")
        model = kuiper.load_hlo(text, backend="numpy")
        a, b = np.float32(2).reshape(()), np.float32(3).reshape(())
        for _ in range(2):
            got = model(a, b)
            assert type(got) is np.ndarray and got.shape == () and got == want, root


def test_a_forward_replaced_after_the_first_call_runs_at_the_next():
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    a, b = np.ones((2, 6), np.float32), np.ones((2, 6), np.float32)
    model(a, b)
    seen = []
    op = model.steps[0].op
    forward = op.forward

    def recording(*inputs):
        seen.append(len(inputs))
        return forward(*inputs) * 10

    op.forward = recording
    np.testing.assert_array_equal(model(a, b), np.full((3, 4), 20, np.float32))
    assert seen == [2]
    model(a, b)  # and it stays: the replaced forward is not specialized away
    assert seen == [2, 2]


def test_a_profile_times_the_specialized_steps():
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    a, b = np.ones((2, 6), np.float32), np.ones((2, 6), np.float32)
    model(a, b)

    class Names(StepObserver):
        def __init__(self):
            self.names = []

        def after_step(self, node, inputs, outputs):
            self.names.append(node.type)

    names = Names()
    np.testing.assert_array_equal(model(a, b, observer=names), np.full((3, 4), 2, np.float32))
    assert names.names == ["Elementwise", "Reshape"]


def test_kuiper_specialize_0_keeps_every_step_on_its_forward(monkeypatch):
    monkeypatch.setenv("KUIPER_SPECIALIZE", "0")
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    a, b = np.ones((2, 6), np.float32), np.ones((2, 6), np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(model(a, b), np.full((3, 4), 2, np.float32))
    assert _specialized_count(model) == 0
    monkeypatch.setenv("KUIPER_SPECIALIZE", "1")
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    model(a, b)
    assert _specialized_count(model) == 2


def test_a_specialization_that_fails_names_the_op(monkeypatch):
    from kuiper.graph import OpExecutionError
    from kuiper.ops.shape import Reshape

    def broken(self, inputs):
        raise ValueError("no fast path here")

    monkeypatch.setattr(Reshape, "specialized", broken)
    model = kuiper.load_hlo(ADD_THEN_RESHAPE, backend="numpy")
    with pytest.raises(OpExecutionError, match=r"'r'.*ValueError: no fast path here"):
        model(np.ones((2, 6), np.float32), np.ones((2, 6), np.float32))
