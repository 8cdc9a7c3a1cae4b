"""HLO modules that loop forever, nest deep, ask for huge sizes or are malformed: each ends in a
KuiperError naming the instruction and its line (or runs, when valid), within the budgets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kuiper
from kuiper.cli import main
from kuiper.errors import ConfigError, KuiperError, OperatorParamError, SizeLimitError

LOOP = """HloModule m
body {
  t = (s32[], f32[2]) parameter(0)
  v = f32[2] get-tuple-element(t), index=1
  w = f32[2] add(v, v)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT out = (s32[], f32[2]) tuple(next, w)
}
forever {
  t = (s32[], f32[2]) parameter(0)
  ROOT c = pred[] constant(true)
}
below {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(LIMIT)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  loop = (s32[], f32[2]) while(init), condition=CONDITION, body=body
  ROOT y = f32[2] get-tuple-element(loop), index=1
}
"""
LOOP_LINE = 25  # the line of `loop = ... while(...)`


def loop_module(condition: str = "below", limit: int = 3) -> str:
    return LOOP.replace("CONDITION", condition).replace("LIMIT", str(limit))


def test_a_valid_loop_runs():
    y = kuiper.load_hlo(loop_module(limit=3))(np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(y, [8.0, -16.0])  # doubled three times


def test_a_constant_true_condition_is_refused_at_build():
    with pytest.raises(OperatorParamError, match=rf"'loop'.*m:{LOOP_LINE}.*constant true"):
        kuiper.load_hlo(loop_module("forever"))


def test_a_long_loop_stops_at_the_budget_naming_the_instruction(monkeypatch):
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", "1000")
    model = kuiper.load_hlo(loop_module(limit=2**31 - 1))
    with pytest.raises(SizeLimitError, match=rf"op 'loop' of type While \(m:{LOOP_LINE}\): the loop ran 1000 "):
        model(np.ones(2, np.float32))
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", "1001")  # read per call: exactly enough is enough
    assert kuiper.load_hlo(loop_module(limit=1000))(np.zeros(2, np.float32)).shape == (2,)


def test_the_loop_budget_comes_from_kuiper_toml(tmp_path, monkeypatch):
    monkeypatch.delenv("KUIPER_LOOP_BUDGET", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kuiper.toml").write_text("loop_budget = 50\n")
    model = kuiper.load_hlo(loop_module(limit=100))
    with pytest.raises(SizeLimitError, match="ran 50 iterations.*loop_budget"):
        model(np.ones(2, np.float32))
    (tmp_path / "bad").mkdir()  # (a config file is read once per folder)
    (tmp_path / "bad" / "kuiper.toml").write_text('loop_budget = "many"\n')
    monkeypatch.chdir(tmp_path / "bad")
    with pytest.raises(ConfigError, match="loop_budget"):
        model(np.ones(2, np.float32))


def test_a_bad_loop_budget_variable_is_a_config_error(monkeypatch):
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", "-5")
    with pytest.raises(ConfigError, match="KUIPER_LOOP_BUDGET"):
        kuiper.load_hlo(loop_module())(np.ones(2, np.float32))


NESTED = """HloModule nested
inner_body {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  v = f32[2] get-tuple-element(t), index=1
  w = f32[2] negate(v)
  ROOT out = (s32[], f32[2]) tuple(next, w)
}
inner_below {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(INNER)
  ROOT lt = pred[] compare(i, n), direction=LT
}
outer_body {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  zero = s32[] constant(0)
  v = f32[2] get-tuple-element(t), index=1
  start = (s32[], f32[2]) tuple(zero, v)
  inner = (s32[], f32[2]) while(start), condition=inner_below, body=inner_body
  w = f32[2] get-tuple-element(inner), index=1
  ROOT out = (s32[], f32[2]) tuple(next, w)
}
outer_below {
  t = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(OUTER)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  outer = (s32[], f32[2]) while(init), condition=outer_below, body=outer_body
  ROOT y = f32[2] get-tuple-element(outer), index=1
}
"""


def nested_loops(outer: int, inner: int) -> str:
    return NESTED.replace("OUTER", str(outer)).replace("INNER", str(inner))


def test_nested_loops_run_their_product_of_iterations():
    y = kuiper.load_hlo(nested_loops(3, 5))(np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(y, [-1.0, 2.0])  # 15 negations


def test_a_loop_stops_at_the_time_budget_naming_the_instruction(monkeypatch):
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", str(2**40))  # only the time budget can end it
    monkeypatch.setenv("KUIPER_LOOP_TIME_BUDGET", "200ms")
    model = kuiper.load_hlo(loop_module(limit=2**31 - 1))
    with pytest.raises(SizeLimitError, match=rf"op 'loop' of type While \(m:{LOOP_LINE}\): the loop ran past the "
                                             r"loop time budget of 0.2 s.*KUIPER_LOOP_TIME_BUDGET"):
        model(np.ones(2, np.float32))
    monkeypatch.setenv("KUIPER_LOOP_TIME_BUDGET", "1h")  # read per call
    assert kuiper.load_hlo(loop_module(limit=100))(np.zeros(2, np.float32)).shape == (2,)


def test_nested_loops_stop_at_the_time_budget(monkeypatch):
    # 10^6 outer iterations of 10^3 inner ones (10^9 in all, hours): each loop is within the
    # iteration budget, so only the time budget ends the nest.
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", "1000000")
    monkeypatch.setenv("KUIPER_LOOP_TIME_BUDGET", "0.3")
    model = kuiper.load_hlo(nested_loops(1_000_000, 1_000))
    with pytest.raises(SizeLimitError, match=r"loop time budget of 0.3 s"):
        model(np.ones(2, np.float32))


def test_the_loop_time_budget_comes_from_kuiper_toml(tmp_path, monkeypatch):
    monkeypatch.delenv("KUIPER_LOOP_TIME_BUDGET", raising=False)
    monkeypatch.setenv("KUIPER_LOOP_BUDGET", str(2**40))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kuiper.toml").write_text('loop_time_budget = "150ms"\n')
    model = kuiper.load_hlo(loop_module(limit=2**31 - 1))
    with pytest.raises(SizeLimitError, match=r"0.15 s.*loop_time_budget"):
        model(np.ones(2, np.float32))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "kuiper.toml").write_text('loop_time_budget = "forever"\n')
    monkeypatch.chdir(tmp_path / "bad")
    with pytest.raises(ConfigError, match="loop_time_budget.*positive duration"):
        model(np.ones(2, np.float32))


@pytest.mark.parametrize("value", ["0", "-1", "5 parsecs", "nan", ""])
def test_a_bad_loop_time_budget_variable_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv("KUIPER_LOOP_TIME_BUDGET", value)
    if not value:  # unset or empty: the default
        assert kuiper.load_hlo(loop_module())(np.ones(2, np.float32)).shape == (2,)
        return
    with pytest.raises(ConfigError, match="KUIPER_LOOP_TIME_BUDGET"):
        kuiper.load_hlo(loop_module())(np.ones(2, np.float32))


def test_ctrl_c_ends_a_long_run_with_one_line_and_exit_130(tmp_path):
    path = tmp_path / "spin.hlo.txt"
    path.write_text(loop_module(limit=2**31 - 1))
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    env = dict(os.environ, KUIPER_LOOP_BUDGET=str(2**31))

    def default_sigint():  # a shell may start a background job with SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    process = subprocess.Popen([sys.executable, "-m", "kuiper", "run", str(path), "-i", str(tmp_path / "x.npy")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=default_sigint)
    try:
        time.sleep(4)  # loaded and spinning (a budget of 2^31 iterations takes hours)
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130
    assert err.strip().splitlines()[-1] == "kuiper: interrupted"
    assert "Traceback" not in err


def test_a_body_whose_result_differs_from_the_state_is_refused_at_translation():
    text = loop_module().replace("ROOT out = (s32[], f32[2]) tuple(next, w)",
                                 "b = f32[3] broadcast(one), dimensions={}\n  ROOT out = (s32[], f32[3]) tuple(next, b)")
    with pytest.raises(OperatorParamError, match=r"m:26: while 'loop': the body's result has shape \(s32\[\], f32\[3\]\)"):
        kuiper.load_hlo(text)


SHAPE = """HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = BODY
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


@pytest.mark.parametrize("body, message", [
    ("f32[0] pad(x, z), padding=-3_-3", "crops more than its 4 element"),
    ("f32[2] slice(x), slice={[3:1:-1]}", "positive stride"),
    ("f32[2] slice(x), slice={[0:2:0]}", "positive stride"),
    ("f32[2] slice(x), slice={[0:9:1]}", "limit <= 4"),
])
def test_malformed_shape_instructions_are_refused_naming_the_line(body, message):
    with pytest.raises(OperatorParamError, match=rf"m:5: \w+ 'r': .*{message}"):
        kuiper.load_hlo(SHAPE.replace("BODY", body))


def test_negative_padding_within_the_operand_crops():
    model = kuiper.load_hlo(SHAPE.replace("BODY", "f32[2] pad(x, z), padding=-1_-1"))
    np.testing.assert_array_equal(model(np.arange(4, dtype=np.float32)), [1.0, 2.0])


def test_reduce_window_padding_of_ten_to_the_eleven_is_refused_before_allocating(monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1GiB")
    body = "f32[1] reduce-window(x, z), window={size=100000000004 pad=50000000000_50000000000}, to_apply=add"
    model = kuiper.load_hlo(SHAPE.replace("BODY", body))
    with pytest.raises(SizeLimitError, match=r"op 'r' of type ReduceWindow \(m:5\).*373 GiB"):
        model(np.ones(4, np.float32))


def _call_chain(count: int) -> str:
    lines = ["HloModule chain", "c0 {", "  p = f32[2] parameter(0)", "  ROOT r = f32[2] negate(p)", "}"]
    for i in range(1, count):
        lines += [f"c{i} {{", "  p = f32[2] parameter(0)", f"  ROOT r = f32[2] call(p), to_apply=c{i - 1}", "}"]
    lines += ["ENTRY main {", "  x = f32[2] parameter(0)", f"  ROOT y = f32[2] call(x), to_apply=c{count - 1}", "}"]
    return "\n".join(lines) + "\n"


def test_a_ten_thousand_computation_call_chain_loads_runs_and_draws(tmp_path, capsys):
    path = tmp_path / "chain.hlo.txt"
    path.write_text(_call_chain(10_000))
    np.testing.assert_array_equal(kuiper.load_hlo(str(path))(np.array([1.0, 2.0], np.float32)), [-1.0, -2.0])
    assert main(["hlo", "dfg", str(path), "-o", str(tmp_path / "g.json")]) == 0
    assert (tmp_path / "g.json").stat().st_size > 0


def test_a_call_cycle_is_an_error_not_a_hang():
    text = _call_chain(3).replace("ROOT r = f32[2] negate(p)", "ROOT r = f32[2] call(p), to_apply=c2")
    with pytest.raises(KuiperError):
        kuiper.load_hlo(text)


def test_async_updates_that_feed_each_other_end_in_an_error_not_a_hang():
    # The verifier walks an async chain back to its start; a cycle of updates once made that walk endless.
    text = """HloModule m
b {
  x = f32[2] parameter(0)
  ROOT y = f32[2] negate(x)
}
ENTRY e {
  p = f32[2] parameter(0)
  u1 = ((f32[2]), f32[2], s32[]) async-update(u2), calls=b
  u2 = ((f32[2]), f32[2], s32[]) async-update(u1), calls=b
  ROOT d = f32[2] async-done(u2), calls=b
}"""
    with pytest.raises(KuiperError, match="cycle through 'u2'"):
        kuiper.load_hlo(text)
