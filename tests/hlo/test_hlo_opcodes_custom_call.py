"""custom-call: a target a plugin registers runs; any other is refused at load time, naming it."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import plugins
from kuiper.errors import PluginError, UnsupportedOperatorError
from kuiper.ops.base import Op


class _ScaleByConfig(Op):
    """Multiplies by the number in the custom call's backend_config."""

    types = ("test.ScaleByConfig",)

    def setup(self):
        self.factor = float(self.str_param("backend_config"))
        self.target = self.str_param("target")

    def forward(self, x):
        return x * self.factor


def _flip_rows(site):
    """A translator of the plugin's own: the custom call becomes a canonical Reverse."""
    return [site.op("Reverse", site.inputs, site.outputs, {"dims": [0]})]


class _CustomCallPlugin:
    @kuiper.hookimpl
    def kuiper_add_ops(self):
        return [_ScaleByConfig]

    @kuiper.hookimpl
    def kuiper_add_custom_calls(self):
        return {"test_scale": "test.ScaleByConfig", "test_flip_rows": _flip_rows}


@pytest.fixture
def custom_calls(register_plugin):
    register_plugin(_CustomCallPlugin(), "test_custom_calls")


def run(call: str, x):
    text = f"HloModule test\nENTRY main {{\n  p = f32[2,2] parameter(0)\n  ROOT r = f32[2,2] {call}\n}}\n"
    return np.asarray(kuiper.load_hlo(text, backend="numpy")(x, to_numpy=True))


X = np.float32([[1, 2], [3, 4]])


def test_a_target_registered_as_an_op_type_gets_the_operands_and_the_backend_config(custom_calls):
    got = run('custom-call(p), custom_call_target="test_scale", backend_config="2.5"', X)
    np.testing.assert_array_equal(got, X * 2.5)


def test_a_target_registered_as_a_translator_translates_itself(custom_calls):
    np.testing.assert_array_equal(run('custom-call(p), custom_call_target="test_flip_rows"', X), X[::-1])


def test_an_unregistered_target_is_refused_naming_it_and_the_hook():
    with pytest.raises(UnsupportedOperatorError, match="custom_call_target='test_scale'.*kuiper_add_custom_calls"):
        run('custom-call(p), custom_call_target="test_scale", backend_config="2.5"', X)


def test_two_plugins_registering_one_target_is_an_error(custom_calls, register_plugin):
    class Again:
        @kuiper.hookimpl
        def kuiper_add_custom_calls(self):
            return {"test_flip_rows": "Identity"}

    register_plugin(Again(), "again")
    with pytest.raises(PluginError, match="'test_flip_rows' is registered by both"):
        plugins.custom_call_registry()
