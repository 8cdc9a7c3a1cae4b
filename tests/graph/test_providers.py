"""Execution providers claim runs of steps (kuiper/graph/providers.py): the seam, with a provider of the test's own."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import PluginError
from kuiper.graph.providers import PARTITION_TYPE, Partition, Provider
from kuiper.hookspecs import hookimpl
from tests.conftest import param_text, write_model


class Doubling(Partition):
    """Runs its members, then doubles every output: a partition that is visibly not the reference."""

    calls = 0

    def forward(self, *inputs):
        type(self).calls += 1
        results = self.run_members(*inputs)
        return tuple(2 * r for r in results) if isinstance(results, tuple) else 2 * results


class ReluRuns(Provider):
    """Claims every run of two or more consecutive ReLU steps."""

    name = "relu-runs"

    def __init__(self, partition=Doubling, claims=None):
        self.partition, self.fixed_claims, self.offered = partition, claims, []

    def claim(self, units, context):
        self.offered.append([unit.node.name for unit in units])
        if self.fixed_claims is not None:
            return self.fixed_claims
        claims, start = [], None
        for index, unit in enumerate([*units, None]):
            if unit is not None and unit.node.type == "ReLU":
                start = index if start is None else start
                continue
            if start is not None and index - start >= 2:
                claims.append((start, index))
            start = None
        return claims

    def compile(self, members, inputs, outputs, target, node):
        return self.partition(node, target.backend, members)


class ProviderPlugin:
    def __init__(self, provider):
        self.provider = provider

    @hookimpl
    def kuiper_add_providers(self, backend_name):
        return {self.provider.name: self.provider} if backend_name == "numpy" else None


# x -> relu a -> relu b -> sigmoid c -> relu d -> relu e (also read by the add) -> add(e, c) f
CHAIN = param_text("""
    pnnx.Input in0 0 1 x
    nn.ReLU a 1 1 x a
    nn.ReLU b 1 1 a b
    nn.Sigmoid c 1 1 b c
    nn.ReLU d 1 1 c d
    nn.ReLU e 1 1 d e
    pnnx.Expression f 2 1 e c f expr=add(@0,@1)
    pnnx.Output out0 1 0 f
    pnnx.Output out1 1 0 e
""")


def _model(tmp_path, **options):
    return kuiper.load(write_model(tmp_path, CHAIN), backend="numpy", fuse=False, **options)


def _reference(x):
    b = np.maximum(x, 0)
    c = 1 / (1 + np.exp(-b.astype(np.float64)))
    e = np.maximum(c, 0)
    return e + c, e


def test_claimed_runs_become_one_step_each_and_what_they_compute_is_used(tmp_path, register_plugin):
    provider = ReluRuns()
    register_plugin(ProviderPlugin(provider), "relu_runs")
    model = _model(tmp_path)
    kinds = [(step.node.type, step.node.name) for step in model.steps]
    assert kinds == [(PARTITION_TYPE, "a..b"), ("Sigmoid", "c"), (PARTITION_TYPE, "d..e"), ("pnnx.Expression", "f")]
    first, second = model.steps[0].node, model.steps[2].node
    assert (first.inputs, first.outputs, first.params["members"]) == (["x"], ["b"], ["a", "b"])
    # e is read by f and returned to the caller: the partition's output; d is private to it.
    assert (second.inputs, second.outputs) == (["c"], ["e"])

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    f, e = model(x)
    # Each partition doubles its output: relu(relu(x)) * 2, then relu(relu(c)) * 2.
    b = 2 * np.maximum(x.astype(np.float64), 0)
    c = 1 / (1 + np.exp(-b))
    np.testing.assert_allclose(e, 2 * c, rtol=1e-6)
    np.testing.assert_allclose(f, 2 * c + c, rtol=1e-6)


def test_without_providers_every_step_is_its_own_op(tmp_path, register_plugin):
    register_plugin(ProviderPlugin(ReluRuns()), "relu_runs")
    model = _model(tmp_path, providers=False)
    assert PARTITION_TYPE not in {step.node.type for step in model.steps}
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    for got, want in zip(model(x), _reference(x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_run_members_computes_what_the_steps_compute(tmp_path, register_plugin):
    register_plugin(ProviderPlugin(ReluRuns(partition=Partition)), "relu_runs")
    model = _model(tmp_path)
    assert [step.node.type for step in model.steps].count(PARTITION_TYPE) == 2
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    for got, want in zip(model(x), _reference(x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


class Watching(Partition):
    """Runs its members step by step and notes, as each member starts, how many earlier members' values are
    still alive."""

    alive: list = []

    def forward(self, *inputs):
        import weakref

        made = []
        for member in self.members:
            run = member.op.forward

            def recording(*values, run=run):
                type(self).alive.append(sum(ref() is not None for ref in made))  # earlier members' values
                result = run(*values)
                made.append(weakref.ref(result))
                return result

            member.op.forward = recording
        try:
            return self.run_members(*inputs)
        finally:
            for member in self.members:
                del member.op.forward


def test_run_members_drops_each_value_after_its_last_reader(tmp_path, register_plugin):
    """Three ReLUs in one partition, step by step: a's value is dropped once b has read it, as the model's plan
    frees a slot after its last reader, so a run holds the values alive at once, not all it made."""
    chain = param_text("""
        pnnx.Input in0 0 1 x
        nn.ReLU a 1 1 x a
        nn.ReLU b 1 1 a b
        nn.ReLU c 1 1 b c
        pnnx.Output out0 1 0 c
    """)
    register_plugin(ProviderPlugin(ReluRuns(partition=Watching)), "relu_runs")
    model = kuiper.load(write_model(tmp_path, chain), backend="numpy", fuse=False)
    Watching.alive = []
    x = np.arange(-3.0, 3.0, dtype=np.float32)
    np.testing.assert_array_equal(model(x), np.maximum(x, 0))
    assert Watching.alive == [0, 1, 1]  # as c starts, a's value is gone: only b's, which c reads, is alive


def test_a_claim_out_of_range_or_overlapping_is_a_plugin_error(tmp_path, register_plugin):
    register_plugin(ProviderPlugin(ReluRuns(claims=[(0, 2), (1, 3)])), "relu_runs")
    with pytest.raises(PluginError, match="provider 'relu-runs' claimed steps 1..3 .* overlaps"):
        _model(tmp_path)


def test_a_later_provider_is_offered_only_what_earlier_ones_left(tmp_path, register_plugin):
    first, second = ReluRuns(), ReluRuns(claims=[])
    second.name = "second"
    register_plugin(ProviderPlugin(first), "relu_runs")
    register_plugin(ProviderPlugin(second), "second")
    _model(tmp_path)
    assert second.offered == [["c"], ["f"]]
