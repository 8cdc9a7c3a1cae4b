"""Built-ins and third parties register through the same hooks; entry points find third parties."""

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import plugins
from kuiper.backends import get_backend
from kuiper.backends.numpy_backend import NumpyBackend
from kuiper.cli import main
from kuiper.errors import PluginError, PluginWarning
from kuiper.ops.base import Op

from conftest import write_model


def test_builtins_register_through_the_hooks():
    registry = plugins.op_registry()
    assert registry["Conv2d"].plugin == "builtin_ops"
    assert plugins.backend_registry()["numpy"].plugin == "numpy"


def test_installed_example_plugin_is_found_through_its_entry_point():
    # plugins/kuiper-scaled-tanh is installed by the README's test command (and .ci/run).
    registered = plugins.op_registry().get("example.layers.ScaledTanh")
    assert registered is not None, "install it: pip install ./plugins/kuiper-scaled-tanh"
    assert registered.plugin == "scaled_tanh"


class _Double(Op):
    types = ("test.Double",)

    def forward(self, x):
        return x * 2


class _DoublePlugin:
    @kuiper.hookimpl
    def kuiper_add_ops(self):
        return [_Double]


class _FastReLU(Op):
    types = ("ReLU",)

    def forward(self, x):
        return self.xp.maximum(x, 0.0) + 1000  # visibly different, to prove it replaced the generic op


class _KernelPlugin:
    @kuiper.hookimpl
    def kuiper_add_kernels(self, backend_name):
        return {"ReLU": _FastReLU} if backend_name == "numpy" else {}


def _relu_model(tmp_path, op_type="nn.ReLU"):
    text = f"7767517\n3 2\npnnx.Input in0 0 1 x #x=(1,2)f32\n{op_type} r 1 1 x y\npnnx.Output out 1 0 y\n"
    return write_model(tmp_path, text)


def test_a_registered_op_runs(tmp_path, register_plugin):
    register_plugin(_DoublePlugin(), "double")
    model = kuiper.load(_relu_model(tmp_path, "test.Double"))
    np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[2.0, -4.0]])


def test_a_kernel_override_replaces_the_op_on_its_backend_only(tmp_path, register_plugin):
    register_plugin(_KernelPlugin(), "fast_relu")
    model = kuiper.load(_relu_model(tmp_path))
    np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[1001.0, 1000.0]])


def test_a_kernel_override_wins_over_fusion(tmp_path, register_plugin):
    # relu sits inside an elementwise chain that fusion would merge into one op.
    text = (
        "7767517\n5 4\npnnx.Input in0 0 1 x #x=(1,2)f32\npnnx.Expression e 1 1 x a expr=mul(@0,2.0)\n"
        "nn.ReLU r 1 1 a b\nnn.Sigmoid s 1 1 b y\npnnx.Output out 1 0 y\n"
    )
    register_plugin(_KernelPlugin(), "fast_relu")
    model = kuiper.load(write_model(tmp_path, text))
    assert "ReLU" in [step.node.type for step in model.steps]
    x = np.array([[1.0, -2.0]], np.float32)
    np.testing.assert_allclose(model(x), 1 / (1 + np.exp(-(np.maximum(2 * x, 0) + 1000))), rtol=1e-6)


class _SpelledKernelPlugin:
    """A round-2 plugin: its kernel keyed by PNNX's spelling, which the PNNX frontend translates away."""

    @kuiper.hookimpl
    def kuiper_add_kernels(self, backend_name):
        return {"nn.ReLU": _FastReLU} if backend_name == "numpy" else {}


def test_a_kernel_under_a_frontends_spelling_is_refused_naming_the_canonical_type(tmp_path, register_plugin):
    register_plugin(_SpelledKernelPlugin(), "spelled_relu")
    with pytest.raises(PluginError, match=r"plugin 'spelled_relu' \(_FastReLU\) registers a kernel on backend 'numpy' "
                                          r"for op type 'nn.ReLU': nn.ReLU is PNNX's spelling of ReLU .*"
                                          r"register it under 'ReLU'"):
        kuiper.load(_relu_model(tmp_path))  # before: it loaded, and ran the built-in ReLU without a word


def test_a_kernel_for_a_type_no_op_declares_is_refused_with_the_nearest_types(register_plugin):
    class Misspelled:
        @kuiper.hookimpl
        def kuiper_add_kernels(self, backend_name):
            return {"Relu": _FastReLU}

    register_plugin(Misspelled(), "misspelled")
    with pytest.raises(PluginError, match=r"for op type 'Relu', which no op declares, .* did you mean 'ReLU'"):
        plugins.kernel_registry("numpy")


def test_an_op_under_a_frontends_spelling_is_refused_pointing_to_kernels(register_plugin):
    class SpelledOp:
        @kuiper.hookimpl
        def kuiper_add_ops(self):
            return [type("SpelledSigmoid", (Op,), {"types": ("F.sigmoid",)})]

    register_plugin(SpelledOp(), "spelled_op")
    with pytest.raises(PluginError, match=r"F.sigmoid is PNNX's spelling of Sigmoid .* register it under 'Sigmoid'; "
                                          r"to replace that op, register a kernel for it \(kuiper_add_kernels\)"):
        plugins.op_registry()


def test_kuiper_ops_names_the_plugin_that_serves_a_type_on_each_backend(register_plugin, capsys):
    register_plugin(_KernelPlugin(), "fast_relu")
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    relu = next(i for i, line in enumerate(lines) if line.split()[:1] == ["ReLU"])
    assert lines[relu].split()[-1] == "[builtin_ops]"
    served = [line.strip() for line in lines[relu + 1:] if line.startswith("      ")][:3]
    assert "on numpy: _FastReLU [fast_relu]" in served
    assert not any(line.startswith("on cupy") for line in served)  # cupy runs the op's own class


def test_two_plugins_claiming_one_op_type_is_an_error(register_plugin):
    class Again:
        @kuiper.hookimpl
        def kuiper_add_ops(self):
            return [type("Conv2dAgain", (Op,), {"types": ("Conv2d",)})]

    register_plugin(Again(), "again")
    with pytest.raises(PluginError, match=r"'Conv2d' is registered by both 'builtin_ops' .* and 'again'"):
        plugins.op_registry()


def test_a_third_party_backend_is_selectable_by_name(tmp_path, register_plugin):
    class Tracing(NumpyBackend):
        name = "tracing"

    class BackendPlugin:
        @kuiper.hookimpl
        def kuiper_add_backends(self):
            return [Tracing]

    register_plugin(BackendPlugin(), "tracing")
    model = kuiper.load(_relu_model(tmp_path), backend="tracing")
    assert model.backend.name == "tracing"
    assert "tracing" in {b.name for b in kuiper.backends()}


# -- kernels and primitives follow capabilities, not names ----------------------------------------------------


def _backend_plugin(backend_class):
    class BackendPlugin:
        @kuiper.hookimpl
        def kuiper_add_backends(self):
            return [backend_class]

    return BackendPlugin()


def test_backends_import_no_op_and_no_kernel():
    # The layer rule of ARCHITECTURE.md, counting imports inside functions too.
    package = Path(kuiper.__file__).parent
    for path in sorted((package / "backends").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = "kuiper.backends" if node.level == 1 else "kuiper" if node.level == 2 else ""
                names = [".".join(filter(None, [base, node.module]))]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith(("kuiper.ops", "kuiper.numba_kernels")), f"{path.name} imports {name}"


def test_no_caller_chooses_a_path_by_backend_name():
    package = Path(kuiper.__file__).parent
    name_test = re.compile(r"""\.name\s*[!=]=\s*["'](numpy|cupy)["']|backend_name\s*[!=]=""")
    offenders = [f"{path.relative_to(package)}:{number}"
                 for path in sorted(package.rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), start=1) if name_test.search(line)]
    assert offenders == []


def test_the_compiled_kernels_serve_backends_by_capability(register_plugin):
    pytest.importorskip("numba")

    class HostArrays(NumpyBackend):
        name = "host_arrays"

    class Opaque(NumpyBackend):
        name = "opaque"
        capabilities = frozenset()

    register_plugin(_backend_plugin(HostArrays), "host_arrays")
    register_plugin(_backend_plugin(Opaque), "opaque")
    assert plugins.kernel_registry("host_arrays")["Conv2d"].plugin == "numba_kernels"
    assert set(plugins.primitive_registry("host_arrays")) == {"compile_elementwise", "softmax_in_place", "blas_threads"}
    assert plugins.kernel_registry("opaque") == {} and plugins.primitive_registry("opaque") == {}


def test_a_plugin_primitive_replaces_the_backends_own_and_can_fall_back_to_it(tmp_path, register_plugin):
    calls = []

    class Bare(NumpyBackend):
        name = "bare_softmax"
        capabilities = frozenset()

    class SoftmaxPlugin:
        @kuiper.hookimpl
        def kuiper_add_primitives(self, backend_name):
            if backend_name != "bare_softmax":  # a third party may still choose by name
                return None

            def softmax_in_place(default, x, axis):
                calls.append(axis)
                return default(x, axis)

            return {"softmax_in_place": softmax_in_place}

    register_plugin(_backend_plugin(Bare), "bare_softmax")
    register_plugin(SoftmaxPlugin(), "softmax_plugin")
    text = "7767517\n3 2\npnnx.Input in0 0 1 x #x=(2,3)f32\nnn.Softmax s 1 1 x y dim=1\npnnx.Output out 1 0 y\n"
    model = kuiper.load(write_model(tmp_path, text), backend="bare_softmax")
    x = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 50.0]], np.float32)
    x64 = x.astype(np.float64)
    expected = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(model(x), expected / expected.sum(axis=1, keepdims=True), rtol=1e-6)
    assert calls == [1]


def test_a_plugin_replacing_something_that_is_not_a_primitive_is_an_error(register_plugin):
    class Bare(NumpyBackend):
        name = "bare_matmul"

    class MatmulPlugin:
        @kuiper.hookimpl
        def kuiper_add_primitives(self, backend_name):
            return {"matmul": lambda default, a, b: a @ b} if backend_name == "bare_matmul" else None

    register_plugin(_backend_plugin(Bare), "bare_matmul")
    register_plugin(MatmulPlugin(), "matmul_plugin")
    with pytest.raises(PluginError, match=r"replaces 'matmul' on backend 'bare_matmul', which is not a backend primitive"):
        get_backend("bare_matmul")


# -- a broken third-party plugin is dropped, not fatal --------------------------------------------------------

BROKEN_HOOK = '''
import kuiper


@kuiper.hookimpl
def kuiper_add_ops():
    raise ValueError("op table is corrupt")


@kuiper.hookimpl
def kuiper_add_kernels(backend_name):
    raise ValueError("kernel table is corrupt")
'''


def _warnings_of(record):
    return [str(w.message) for w in record if issubclass(w.category, PluginWarning)]


def test_a_plugin_whose_import_raises_is_named_once_and_skipped(tmp_path, install_distribution, capsys):
    install_distribution("needs_driver", "raise RuntimeError('no driver on this machine')\n", {"gpu_ops": "needs_driver"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = kuiper.load(_relu_model(tmp_path))
        np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[1.0, 0.0]])
        assert main(["ops"]) == 0  # every command still works
    assert "nn.Conv2d" in capsys.readouterr().out
    messages = _warnings_of(record)
    assert len(messages) == 1, messages
    assert re.search(r"plugin 'gpu_ops' \(entry point 'gpu_ops = needs_driver' of distribution needs-driver 0\.1\) "
                     r"failed to load: RuntimeError: no driver on this machine; going on without it", messages[0])
    assert not plugins.plugin_manager().has_plugin("gpu_ops")


def test_a_plugin_whose_hook_raises_is_named_once_and_dropped(tmp_path, install_distribution, capsys):
    install_distribution("corrupt_tables", BROKEN_HOOK, {"corrupt": "corrupt_tables"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = kuiper.load(_relu_model(tmp_path))
        np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[1.0, 0.0]])
        assert main(["ops"]) == 0
        kuiper.load(_relu_model(tmp_path))
    assert "nn.Conv2d" in capsys.readouterr().out
    messages = _warnings_of(record)
    assert len(messages) == 1, messages  # dropped at its first failure: its other hook never runs again
    assert re.search(r"plugin 'corrupt' \(entry point 'corrupt = corrupt_tables' of distribution corrupt-tables 0\.1\) "
                     r"raised in kuiper_add_\w+: ValueError: \w+ table is corrupt; going on without it", messages[0])
    assert not plugins.plugin_manager().has_plugin("corrupt")


def test_an_error_in_a_builtin_hook_is_not_hidden(register_plugin, monkeypatch):
    # A built-in's failure is kuiper's own bug: it propagates rather than dropping the built-in.
    from kuiper import numba_kernels

    def broken(capabilities):
        raise ZeroDivisionError("kuiper bug")

    monkeypatch.setattr(numba_kernels.kuiper_add_kernels, "__code__", broken.__code__)
    plugins.reset_registries()
    try:
        with pytest.raises(ZeroDivisionError, match="kuiper bug"):
            plugins.kernel_registry("numpy")
    finally:
        monkeypatch.undo()
        plugins.reset_registries()
    assert plugins.plugin_manager().has_plugin("numba_kernels")
