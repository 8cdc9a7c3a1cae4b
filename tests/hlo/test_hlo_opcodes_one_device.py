"""Opcodes that mean something on one device: tokens, barriers, collectives, asynchronous pairs.

The expected values follow XLA's operation semantics for a single participant (worked out by hand):
a collective over a group of one gives each operand back, collective-permute gives zeros to a device
no pair sends to, and an asynchronous start/done pair gives what its synchronous form gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, UnsupportedOperatorError

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
negate_all {
  a = f32[2,3] parameter(0)
  ROOT n = f32[2,3] negate(a)
}
"""
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


def run(body: str, *inputs):
    text = f"HloModule test\n{ADD}ENTRY main {{\n  p = f32[2,3] parameter(0)\n  {body}\n}}\n"
    result = kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def test_tokens_order_nothing_and_add_dependency_returns_its_value():
    body = ("t0 = token[] after-all()\n  t1 = token[] after-all(t0, t0)\n"
            "  ROOT r = f32[2,3] add-dependency(p, t1)")
    np.testing.assert_array_equal(run(body, X), X)


def test_opt_barrier_and_domain_pass_their_operands_through():
    body = ("t = (f32[2,3], f32[2,3]) tuple(p, p)\n  b = (f32[2,3], f32[2,3]) opt-barrier(t)\n"
            "  g = f32[2,3] get-tuple-element(b), index=1\n"
            "  ROOT d = f32[2,3] domain(g), domain={kind=\"sharding\", entry={maximal device=0}, exit={replicated}}")
    np.testing.assert_array_equal(run(body, X), X)


@pytest.mark.parametrize("instruction", [
    "all-reduce(p), replica_groups={}, to_apply=add",
    "all-reduce(p), replica_groups={{0}}, to_apply=add",
    "all-gather(p), replica_groups={{0}}, dimensions={0}",
    "reduce-scatter(p), replica_groups=[1,1]<=[1], dimensions={1}, to_apply=add",
    "all-to-all(p), replica_groups={{0}}, dimensions={0}",
    "collective-broadcast(p), replica_groups={{0}}",
    "collective-permute(p), source_target_pairs={{0,0}}",
    # replica groups over a device mesh's named axes: a group spans the axes named in braces
    "all-reduce(p), replica_groups=mesh['x'=1,'y'=1] {'y'}, to_apply=add",
    "all-reduce(p), replica_groups=mesh['x'=4,'y'=1] {'y'}, to_apply=add",
    "all-reduce(p), replica_groups=maximal_mesh[device_id=0], to_apply=add",
])
def test_a_collective_over_one_participant_gives_the_operand(instruction):
    np.testing.assert_array_equal(run(f"ROOT r = f32[2,3] {instruction}", X), X)


def test_collective_permute_to_no_one_gives_zeros():
    np.testing.assert_array_equal(run("ROOT r = f32[2,3] collective-permute(p), source_target_pairs={}", X),
                                  np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("instruction, needs", [
    ("all-reduce(p), replica_groups={{0,1}}, to_apply=add", "2 devices"),
    ("all-gather(p), replica_groups={}, dimensions={0}", "more than one participant"),  # f32[4,3] from f32[2,3]
    ("collective-permute(p), source_target_pairs={{0,1},{1,0}}", r"devices \[1\]"),
    ("all-reduce(p), replica_groups=mesh['x'=2,'y'=3] {'x','y'}, to_apply=add", "6 devices"),
    ("all-reduce(p), replica_groups=mesh['x'=2,'y'=3] {'1'}, to_apply=add", "3 devices"),  # an axis by index
    ("all-reduce(p), replica_groups=mesh['x'=2,'y'=3, device_ids=(5,4,3,2,1,0)] {'x':(1)2}, to_apply=add",
     "2 devices"),
])
def test_a_collective_for_several_devices_is_refused(instruction, needs):
    result = "f32[4,3]" if instruction.startswith("all-gather") else "f32[2,3]"
    with pytest.raises(KuiperError, match=needs):
        run(f"ROOT r = {result} {instruction}", X)


@pytest.mark.parametrize("start, start_shape", [
    ("all-reduce-start(p), replica_groups={}, to_apply=add", "f32[2,3]"),
    ("all-gather-start(p), replica_groups={{0}}, dimensions={0}", "(f32[2,3], f32[2,3])"),
    ("collective-permute-start(p), source_target_pairs={{0,0}}", "(f32[2,3], f32[2,3], u32[], u32[])"),
])
def test_asynchronous_collectives_run_at_their_start(start, start_shape):
    opcode = start.split("(")[0].removesuffix("-start")
    body = f"s = {start_shape} {start}\n  ROOT r = f32[2,3] {opcode}-done(s)"
    np.testing.assert_array_equal(run(body, X), X)


def test_async_start_runs_its_computation_and_done_returns_the_result():
    body = ("s = ((f32[2,3]), f32[2,3], s32[]) async-start(p), calls=negate_all\n"
            "  u = ((f32[2,3]), f32[2,3], s32[]) async-update(s)\n"
            "  ROOT r = f32[2,3] async-done(u)")
    np.testing.assert_array_equal(run(body, X), -X)


def test_two_starts_may_wrap_one_computation_and_a_state_may_pass_a_tuple_and_a_copy():
    body = ("s0 = ((f32[2,3]), f32[2,3], s32[]) async-start(p), calls=negate_all\n"
            "  d0 = f32[2,3] async-done(s0)\n"
            "  s1 = ((f32[2,3]), f32[2,3], s32[]) async-start(d0), calls=negate_all\n"
            "  t = (((f32[2,3]), f32[2,3], s32[]), f32[2,3]) tuple(s1, p)\n"
            "  g = ((f32[2,3]), f32[2,3], s32[]) get-tuple-element(t), index=0\n"
            "  c = ((f32[2,3]), f32[2,3], s32[]) copy(g)\n"
            "  d1 = f32[2,3] async-done(c)\n"
            "  ROOT r = f32[2,3] subtract(d1, d0)")
    np.testing.assert_array_equal(run(body, X), 2 * X)  # x - (-x)


def test_send_and_recv_are_refused_naming_why():
    body = ("t = token[] after-all()\n  s = (f32[2,3], u32[], token[]) send(p, t), channel_id=1\n"
            "  ROOT d = token[] send-done(s), channel_id=1")
    with pytest.raises(UnsupportedOperatorError, match="send: it moves data to or from another device"):
        run(body, X)
