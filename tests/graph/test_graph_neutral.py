"""The graph is frontend-neutral: frontends come through a hook, Models pickle, steps are observable."""

from __future__ import annotations

import pickle
import sys
import threading

import numpy as np
import pluggy
import pytest

import kuiper
from kuiper import plugins
from kuiper.errors import GraphError, InputError, KuiperError, ModelFormatError
from kuiper.graph import build
from kuiper.model_ir import ModelIR, OperandInfo, OpNode

from conftest import MODELS, reference_batches, write_model

TOY_FORMAT = '''
"""A third-party frontend: a ``.toy`` file lists elementwise op types, one per line, applied in turn."""
import kuiper
from kuiper.model_ir import ModelIR, OperandInfo, OpNode


class ToyFrontend(kuiper.Frontend):
    name = "toy"
    suffixes = (".toy",)

    @classmethod
    def load(cls, path, scale=None):
        ops, previous = [], "x"
        for number, line in enumerate(path.read_text().split(), start=1):
            ops.append(OpNode(line, f"op{number}", [previous], [f"t{number}"], source=f"{path}:{number}"))
            previous = f"t{number}"
        operands = {"x": OperandInfo("x", (None, 4), "float32")}
        return ModelIR(ops, operands, inputs=["x"], outputs=[previous], source=str(path))


@kuiper.hookimpl
def kuiper_add_frontends():
    return [ToyFrontend]
'''


@pytest.fixture
def toy_format_installed(install_distribution):
    install_distribution("toy_format", TOY_FORMAT, {"toy": "toy_format"})


def test_a_third_party_frontend_is_found_through_its_entry_point(tmp_path, toy_format_installed):
    path = tmp_path / "chain.toy"
    path.write_text("ReLU\nSigmoid\n")
    model = kuiper.load(path)
    x = np.array([[-1.0, 0.0, 2.0, -3.0]], np.float32)
    np.testing.assert_allclose(model(x), 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    assert plugins.frontend_registry()["toy"].plugin == "toy"
    assert pickle.loads(pickle.dumps(model)).origin.arguments["format"] == "toy"


def test_a_file_no_frontend_claims_names_the_known_formats(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\0")
    with pytest.raises(ModelFormatError, match=r"model.tflite: no installed frontend reads this file.*pnnx: \.pnnx\.param"):
        kuiper.load(path)


def test_the_graph_builds_from_an_in_memory_ir_without_pnnx_types():
    ir = ModelIR(
        ops=[OpNode("ReLU", "r", ["a"], ["b"]), OpNode("Tanh", "t", ["b"], ["c"])],
        operands={"a": OperandInfo("a", (2,), "float32")},
        inputs=["a"],
        outputs=["c", "b"],
    )
    model = build(ir, fuse=False)
    c, b = model(np.array([-1.0, 1.0], np.float32))
    np.testing.assert_allclose(c, np.tanh([0.0, 1.0]), rtol=1e-6)
    np.testing.assert_array_equal(b, [0.0, 1.0])
    with pytest.raises(KuiperError, match="in-memory graph and cannot be pickled"):
        pickle.dumps(model)


def test_an_output_nothing_produces_is_a_graph_error():
    ir = ModelIR([], {}, inputs=["a"], outputs=["ghost"], source="mem")
    with pytest.raises(GraphError, match="model output 'ghost' is not produced"):
        build(ir)


def test_a_pnnx_output_line_that_declares_outputs_is_a_graph_error(tmp_path):
    text = "7767517\n3 3\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 x y\npnnx.Output o 1 1 y z\n"
    with pytest.raises(GraphError, match=r"pnnx.Output only reads"):
        kuiper.load(write_model(tmp_path, text))


def test_nested_tuple_outputs_flatten_without_recursion(tmp_path):
    depth = 3000
    lines = ["pnnx.Input i 0 1 x", "nn.ReLU r 1 1 x y", "prim::TupleConstruct t0 1 1 y u0"]
    lines += [f"prim::TupleConstruct t{k} 1 1 u{k - 1} u{k}" for k in range(1, depth)]
    lines.append(f"pnnx.Output o 1 0 u{depth - 1}")
    text = f"7767517\n{len(lines)} {depth + 2}\n" + "\n".join(lines) + "\n"
    model = kuiper.load(write_model(tmp_path, text))
    assert [spec.name for spec in model.outputs] == ["y"]
    np.testing.assert_array_equal(model(np.float32([-1, 2])), [0, 2])


def test_a_fixture_model_pickles_as_its_path_and_matches_after_unpickling():
    name = "two_in_two_out"
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
    data = pickle.dumps(model)
    assert len(data) < 2000, "a pickled Model is its recipe, not its weights"
    clone = pickle.loads(data)
    inputs = reference_batches(name)["b1"]["inputs"]
    for ours, theirs in zip(model(*inputs), clone(*inputs)):
        np.testing.assert_array_equal(ours, theirs)
    assert clone.backend.name == "numpy"


def test_the_backend_resolved_at_load_travels_with_the_pickle(monkeypatch):
    monkeypatch.setenv("KUIPER_BACKEND", "numpy")
    model = kuiper.load(MODELS / "two_in_two_out" / "model.pnnx.param")
    monkeypatch.setenv("KUIPER_BACKEND", "no-such-backend")
    assert pickle.loads(pickle.dumps(model)).backend.name == "numpy"


def test_one_model_called_from_many_threads_gives_identical_results():
    name = "resnet18_w8"  # convolutions with per-tile-size Winograd weights made on first use
    model = kuiper.load(MODELS / name / "model.pnnx.param")
    batches = reference_batches(name)
    feeds = [batch["inputs"] for batch in batches.values()]
    expected = [model(*inputs) for inputs in feeds]
    failures = []

    def worker(index):
        for round_ in range(5):
            inputs = feeds[(index + round_) % len(feeds)]
            got = model(*inputs)
            want = expected[(index + round_) % len(feeds)]
            for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                if not np.array_equal(a, b):
                    failures.append(index)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_an_observer_sees_every_step_in_order(tmp_path):
    text = "7767517\n4 3\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y\nnn.Tanh t 1 1 y z\npnnx.Output o 1 0 z\n"
    model = kuiper.load(write_model(tmp_path, text), fuse=False)

    class FirstNaN(kuiper.StepObserver):
        def __init__(self):
            self.seen, self.first_nan = [], None

        def after_step(self, node, inputs, outputs):
            self.seen.append((node.name, tuple(outputs[0].shape)))
            if self.first_nan is None and np.isnan(outputs[0]).any():
                self.first_nan = node.name

    observer = FirstNaN()
    model.run({"x": np.float32([[1, np.nan, -1]])}, observer=observer)
    assert observer.seen == [("r", (1, 3)), ("t", (1, 3))]
    assert observer.first_nan == "r"


@pytest.mark.parametrize("feeds", [[np.zeros((1, 3), np.float32)], None, "x"])
def test_run_with_something_other_than_a_mapping_is_an_input_error(tmp_path, feeds):
    text = "7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y\npnnx.Output o 1 0 y\n"
    model = kuiper.load(write_model(tmp_path, text))
    with pytest.raises(InputError, match="run\\(\\) takes a mapping"):
        model.run(feeds)


def test_any_failure_inside_an_op_is_a_kuiper_error_naming_the_op(tmp_path, monkeypatch):
    text = "7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.Tanh t 1 1 x y\npnnx.Output o 1 0 y\n"
    model = kuiper.load(write_model(tmp_path, text), fuse=False)

    def broken(*inputs):
        raise RuntimeError("device on fire")

    monkeypatch.setattr(model.steps[0].op, "forward", broken)
    with pytest.raises(KuiperError, match=r"op 't' of type Tanh .*PNNX nn.Tanh\) failed on inputs \[\(1, 3\) float32\]: RuntimeError"):
        model(np.zeros((1, 3), np.float32))


def test_hooks_are_called_through_pluggy_so_wrappers_work(register_plugin):
    calls = []

    class Tracer:
        @pluggy.HookimplMarker("kuiper")(wrapper=True)
        def kuiper_add_ops(self):
            calls.append("before")
            result = yield
            calls.append(len(result))
            return result

    register_plugin(Tracer(), "tracer")
    registry = plugins.op_registry()
    assert "Conv2d" in registry
    assert calls[0] == "before" and calls[1] >= 1


def test_the_tensor_ir_imports_no_frontend():
    import subprocess

    code = (
        "import sys, kuiper.ir, kuiper.ir.codegen_numpy, kuiper.ir.codegen_cuda\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('kuiper.pnnx_expr', 'kuiper.formats')))\n"
        "print(bad)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout


def _chain(tmp_path, count: int):
    lines = ["pnnx.Input i 0 1 v0 #v0=(2,3)f32"]
    for k in range(count):
        if k % 2:
            lines.append(f"pnnx.Expression e{k} 1 1 v{k} v{k + 1} expr=mul(@0,0.999)")
        else:
            lines.append(f"nn.Tanh t{k} 1 1 v{k} v{k + 1}")
    lines.append(f"pnnx.Output o 1 0 v{count}")
    return write_model(tmp_path, f"7767517\n{len(lines)} {count + 1}\n" + "\n".join(lines) + "\n", name=f"c{count}")


def test_a_chain_of_ten_thousand_elementwise_ops_loads_fused_in_bounded_groups(tmp_path):
    count = 10_000
    fused = kuiper.load(_chain(tmp_path, count))
    assert len(fused.steps) < count // 16, "the chain is fused into groups"
    assert sum(len(group) for group in fused.fused_groups) == count
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    assert _chain_error(fused(x), x, count) <= 1.1 * _chain_error(_chain_in_float32(x, count), x, count)


def _chain_in_float32(x, count):
    """The chain op by op in NumPy's float32."""
    for k in range(count):
        x = np.tanh(x) if k % 2 == 0 else x * np.float32(0.999)
    return x


def _chain_error(got, x, count) -> float:
    """The largest relative distance of ``got`` from the chain computed in float64."""
    want = x.astype(np.float64)
    for k in range(count):
        want = np.tanh(want) if k % 2 == 0 else want * 0.999
    return float(np.max(np.abs(got - want) / np.abs(want)))


def test_a_long_chain_fused_matches_the_same_chain_unfused(tmp_path):
    """Fused, a chain of 6 elements runs as the interpreter's small calls (its tanh, a few ulps from
    NumPy's), unfused as NumPy's ufuncs: both as accurate as float32 op by op allows (its rounding over
    500 tanh is 6e-6 from float64).  From MIN_ELEMENTS on, both run the interpreter's tanh: the same bits."""
    path = _chain(tmp_path, 1_000)
    fused, unfused = kuiper.load(path), kuiper.load(path, fuse=False)
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    bound = 1.1 * _chain_error(_chain_in_float32(x, 1_000), x, 1_000)
    assert _chain_error(fused(x), x, 1_000) <= bound and _chain_error(unfused(x), x, 1_000) <= bound
    large = np.linspace(-3, 3, 3 * 2048, dtype=np.float32).reshape(2048, 3)  # dim 0 may vary
    np.testing.assert_array_equal(fused(large), unfused(large))


def test_a_declared_operand_over_the_size_budget_is_refused_at_build(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1MB")
    text = "7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y #y=(1000,1000)f32\npnnx.Output o 1 0 y\n"
    with pytest.raises(kuiper.SizeLimitError, match=r"operand 'y' as declared.*\(1000, 1000\)"):
        kuiper.load(write_model(tmp_path, text))
