"""Built-ins and third parties register through the same hooks; entry points find third parties."""

import numpy as np
import pytest

import kuiper
from kuiper import plugins
from kuiper.backends.numpy_backend import NumpyBackend
from kuiper.errors import PluginError
from kuiper.ops.base import Op

from conftest import write_model


def test_builtins_register_through_the_hooks():
    registry = plugins.op_registry()
    assert registry["nn.Conv2d"].plugin == "builtin_ops"
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
    types = ("nn.ReLU",)

    def forward(self, x):
        return self.xp.maximum(x, 0.0) + 1000  # visibly different, to prove it replaced the generic op


class _KernelPlugin:
    @kuiper.hookimpl
    def kuiper_add_kernels(self, backend_name):
        return {"nn.ReLU": _FastReLU} if backend_name == "numpy" else {}


@pytest.fixture
def register():
    added = []

    def _register(plugin, name):
        plugins.plugin_manager().register(plugin, name=name)
        plugins.reset_registries()
        added.append(name)

    yield _register
    for name in added:
        plugins.plugin_manager().unregister(name=name)
    plugins.reset_registries()


def _relu_model(tmp_path, op_type="nn.ReLU"):
    text = f"7767517\n3 2\npnnx.Input in0 0 1 x #x=(1,2)f32\n{op_type} r 1 1 x y\npnnx.Output out 1 0 y\n"
    return write_model(tmp_path, text)


def test_a_registered_op_runs(tmp_path, register):
    register(_DoublePlugin(), "double")
    model = kuiper.load(_relu_model(tmp_path, "test.Double"))
    np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[2.0, -4.0]])


def test_a_kernel_override_replaces_the_op_on_its_backend_only(tmp_path, register):
    register(_KernelPlugin(), "fast_relu")
    model = kuiper.load(_relu_model(tmp_path))
    np.testing.assert_array_equal(model(np.array([[1.0, -2.0]], np.float32)), [[1001.0, 1000.0]])


def test_a_kernel_override_wins_over_fusion(tmp_path, register):
    # relu sits inside an elementwise chain that fusion would merge into one op.
    text = (
        "7767517\n5 4\npnnx.Input in0 0 1 x #x=(1,2)f32\npnnx.Expression e 1 1 x a expr=mul(@0,2.0)\n"
        "nn.ReLU r 1 1 a b\nnn.Sigmoid s 1 1 b y\npnnx.Output out 1 0 y\n"
    )
    register(_KernelPlugin(), "fast_relu")
    model = kuiper.load(write_model(tmp_path, text))
    assert "nn.ReLU" in [step.node.type for step in model.steps]
    x = np.array([[1.0, -2.0]], np.float32)
    np.testing.assert_allclose(model(x), 1 / (1 + np.exp(-(np.maximum(2 * x, 0) + 1000))), rtol=1e-6)


def test_two_plugins_claiming_one_op_type_is_an_error(register):
    class Again:
        @kuiper.hookimpl
        def kuiper_add_ops(self):
            return [type("Conv2dAgain", (Op,), {"types": ("nn.Conv2d",)})]

    register(Again(), "again")
    with pytest.raises(PluginError, match=r"'nn.Conv2d' is registered by both 'builtin_ops' .* and 'again'"):
        plugins.op_registry()


def test_a_third_party_backend_is_selectable_by_name(tmp_path, register):
    class Tracing(NumpyBackend):
        name = "tracing"

    class BackendPlugin:
        @kuiper.hookimpl
        def kuiper_add_backends(self):
            return [Tracing]

    register(BackendPlugin(), "tracing")
    model = kuiper.load(_relu_model(tmp_path), backend="tracing")
    assert model.backend.name == "tracing"
    assert "tracing" in {b.name for b in kuiper.backends()}
