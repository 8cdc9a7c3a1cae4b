"""`kuiper bench`: the logic around the timings, on a tiny fixture with the numpy backend.

No timing is asserted (timings live in asv_benchmarks/ and docs/performance.md).
Peers are faked or hidden: these tests never import torch or onnxruntime, and a
missing peer must be a reported line, never a failure.
"""

from __future__ import annotations

import io
import sys
import types

import numpy as np
import pytest

from kuiper import cli
from kuiper.bench import agreement, command, engines, inputs, machine, op_profile, peers, report, run, timing
from kuiper.errors import InputError

from conftest import MODELS

FIXTURE = MODELS / "conv2d_depthwise"  # one nn.Conv2d, 1x4x7x7 -> 1x8x7x7


def hide_module(monkeypatch, name):
    """Make `import name` fail as if the package were not installed."""
    monkeypatch.setitem(sys.modules, name, None)


def bench_main(capsys, *argv):
    code = cli.main(["bench", str(FIXTURE), "--runs", "2", "--warmup", "1", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the command -----------------------------------------------------------------------------
def test_bench_times_kuiper_and_reports_peers_that_are_not_installed(monkeypatch, capsys):
    hide_module(monkeypatch, "torch")
    hide_module(monkeypatch, "onnxruntime")
    code, out, _ = bench_main(capsys)
    assert code == 0
    kuiper_rows = [line for line in out.splitlines() if line.startswith("kuiper 0.")]
    assert len(kuiper_rows) == 1 and "(numpy)" in kuiper_rows[0]
    assert "not compared: torch: not installed" in out
    assert "not compared: onnxruntime: not installed" in out


def test_bench_reports_peer_files_missing_beside_the_model_when_the_libraries_exist(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setitem(sys.modules, "onnxruntime", types.ModuleType("onnxruntime"))
    code, out, _ = bench_main(capsys)
    assert code == 0
    assert f"no TorchScript file {FIXTURE / 'model.pt'}" in out
    assert f"no ONNX file {FIXTURE / 'model.onnx'}" in out


@pytest.mark.parametrize("option", ["--onnx", "--torchscript"])
def test_a_peer_file_the_user_names_must_exist(capsys, tmp_path, option):
    missing = tmp_path / "nothere.onnx"
    code, out, err = bench_main(capsys, option, str(missing))
    assert code == 1
    assert err == f"kuiper: error: {option} {missing}: file not found\n"  # one line, before any timing
    assert out == ""


def test_bench_threads_go_to_kuiper_load_not_to_a_process_wide_setting(monkeypatch, capsys):
    import kuiper
    from kuiper.numba_kernels import runtime

    hide_module(monkeypatch, "torch")
    hide_module(monkeypatch, "onnxruntime")
    real_load, threads_asked = kuiper.load, []

    def recording_load(*args, **kwargs):
        threads_asked.append(kwargs.get("threads"))
        return real_load(*args, **kwargs)

    def no_global_threads(count):
        raise AssertionError(f"set_threads({count}) called: the cap belongs to the model")

    monkeypatch.setattr(kuiper, "load", recording_load)
    monkeypatch.setattr(runtime, "set_threads", no_global_threads)
    code, out, _ = bench_main(capsys, "--threads", "1", "--profile")
    assert code == 0
    assert threads_asked and set(threads_asked) == {1}  # the probe, the timed engine and the profile
    assert "(numpy, 1 threads)" in next(line for line in out.splitlines() if line.startswith("kuiper 0."))


def test_bench_with_compare_none_reports_no_peers(capsys):
    code, out, _ = bench_main(capsys, "--compare", "none", "--batch", "3")
    assert code == 0
    assert "batch 3;" in out
    assert "not compared" not in out


def test_bench_accepts_the_param_file_and_threads(monkeypatch, capsys):
    hide_module(monkeypatch, "threadpoolctl")
    for var in machine.THREAD_ENV_VARS:  # the command sets them for later libraries: restore them afterwards
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    code = cli.main(["bench", str(FIXTURE / "model.pnnx.param"), "--runs", "1", "--warmup", "0",
                     "--compare", "none", "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "NOT limited to 1" in out and "OMP_NUM_THREADS=1" in out


@pytest.mark.parametrize("argv", [["--batch", "0"], ["--runs", "0"], ["--threads", "0"], ["--pause", "-1"],
                                  ["--compare", "tensorflow"]])
def test_bench_rejects_bad_options_with_a_message(capsys, argv):
    code, _, err = bench_main(capsys, *argv)
    assert code == 2  # a usage error, like argparse's own
    assert err.startswith("kuiper: error:")


def test_bench_on_a_missing_model_is_an_error(capsys, tmp_path):
    code = cli.main(["bench", str(tmp_path / "nothing.pnnx.param")])
    assert code == 1
    assert "model file not found" in capsys.readouterr().err


def test_memory_option_measures_a_fresh_process(monkeypatch, capsys):
    hide_module(monkeypatch, "torch")
    hide_module(monkeypatch, "onnxruntime")
    code, out, _ = bench_main(capsys, "--memory")
    assert code == 0
    line = next(line for line in out.splitlines() if line.strip().startswith("kuiper ") and "peak RSS" in line)
    assert "MiB" in line and "failed" not in line


# -- the pieces -----------------------------------------------------------------------------------
def test_peer_files_sit_beside_the_param_file(tmp_path):
    param = tmp_path / "model.pnnx.param"
    assert inputs.peer_file(param, ".pt") == tmp_path / "model.pt"
    assert inputs.peer_file(param, ".onnx") == tmp_path / "model.onnx"
    assert inputs.peer_file(tmp_path / "net.param", ".pt") == tmp_path / "net.pt"


def test_parse_compare():
    assert engines.parse_compare("torch,onnxruntime") == ["torch", "onnxruntime"]
    assert engines.parse_compare(" ort , pytorch, ort") == ["onnxruntime", "torch"]
    assert engines.parse_compare("none") == []
    assert engines.parse_compare("") == []
    with pytest.raises(InputError, match="unknown peer"):
        engines.parse_compare("torch,tvm")


def test_summarise_gives_median_and_percentiles_in_ms():
    stats = timing.summarise([i / 1000 for i in range(1, 11)])  # 1..10 ms
    assert stats.runs == 10
    assert stats.median_ms == pytest.approx(5.5)
    assert stats.p10_ms == pytest.approx(1.9)  # linear interpolation between 1 and 2
    assert stats.p90_ms == pytest.approx(9.1)


def test_max_abs_difference():
    a = [np.array([1.0, 2.0, 3.0], dtype=np.float32), np.zeros((2, 2), dtype=np.float32)]
    b = [np.array([1.0, 2.5, 2.75], dtype=np.float32), np.full((2, 2), -0.125, dtype=np.float32)]
    assert agreement.max_abs_difference(a, b) == 0.5
    assert agreement.max_abs_difference(a, b[:1]) == float("inf")  # an output missing
    assert agreement.max_abs_difference(a[:1], [np.zeros(4)]) == float("inf")  # a shape differs


def test_agreement_tolerance_scales_with_large_outputs():
    # 1e-3 of the largest output magnitude, but never below 1e-4
    assert agreement.agrees(1e-4, 0.05) and not agreement.agrees(2e-4, 0.05)
    assert agreement.agrees(1.5e-3, 2.0) and not agreement.agrees(3e-3, 2.0)
    assert agreement.agrees(0.5, 640.0) and not agreement.agrees(0.7, 640.0)


class FakeClock:
    """Each reading advances time by ``step`` seconds."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def fake_engine(name, calls, outputs=None):
    def call():
        calls.append(name)
        return outputs

    return engines.Engine(name, name, call, lambda o: list(o))


def test_interleaved_timings_run_one_of_each_engine_per_round():
    calls = []
    fakes = [fake_engine("a", calls), fake_engine("b", calls), fake_engine("c", calls)]
    samples = timing.interleaved_timings(fakes, runs=3, warmup=2, clock=FakeClock(0.001))
    assert calls == ["a", "b", "c"] * 5
    assert {name: len(s) for name, s in samples.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(s == pytest.approx(0.001) for values in samples.values() for s in values)


def test_progress_line_appears_only_for_long_runs():
    stream = io.StringIO()
    timing.interleaved_timings([fake_engine("a", [])], runs=3, warmup=0, progress=stream, clock=FakeClock(0.001))
    assert stream.getvalue() == ""
    timing.interleaved_timings([fake_engine("a", [])], runs=3, warmup=1, progress=stream, clock=FakeClock(1.0))
    text = stream.getvalue()
    assert "round 4/4 (timed)" in text and text.endswith("\n")


def test_run_benchmark_compares_peers_with_kuiper_and_survives_a_failing_peer():
    reference = [np.array([[1.0, -2.0]], dtype=np.float32)]
    calls = []
    kuiper_like = fake_engine("kuiper", calls, reference)
    close_peer = fake_engine("onnxruntime", calls, [reference[0] + np.float32(2.0**-15)])  # exact in float32
    off_peer = fake_engine("other", calls, [reference[0] + np.float32(0.5)])

    def broken():
        raise RuntimeError("shape mismatch at batch 8\nmore detail")

    failing = engines.Engine("torch", "torch", broken, list)
    found = run.run_benchmark([kuiper_like, failing, close_peer, off_peer], batch=2, runs=2, warmup=0,
                          model="m")
    assert [e.name for e in found.engines] == ["kuiper", "onnxruntime", "other"]
    assert found.unavailable["torch"] == "failed to run at batch 2: RuntimeError: shape mismatch at batch 8"
    assert found.output_scale == 2.0
    assert found.max_abs_diff["onnxruntime"] == 2.0**-15
    assert found.max_abs_diff["other"] == pytest.approx(0.5)
    text = report.format_report(found)
    other_row = next(line for line in text.splitlines() if line.startswith("other"))
    ort_row = next(line for line in text.splitlines() if line.startswith("onnxruntime"))
    assert "DIFFERS" in other_row and "DIFFERS" not in ort_row
    assert "not compared: torch: failed to run at batch 2" in text


def test_random_inputs_follow_the_declared_shapes_with_the_batch_replaced():
    import kuiper

    model = kuiper.load(FIXTURE / "model.pnnx.param")
    (x,) = inputs.random_inputs(model.inputs, batch=5)
    assert x.shape == (5, 4, 7, 7) and x.dtype == np.float32
    (again,) = inputs.random_inputs(model.inputs, batch=5)
    np.testing.assert_array_equal(x, again)  # seeded: every engine and every run sees the same input


def test_random_inputs_keep_a_dim_0_the_model_fixes(capsys):
    """A JAX program's weights are ENTRY parameters of fixed shape: only a free dim 0 takes the batch."""
    text = ("HloModule m\nENTRY main {\n  x = f32[2,3] parameter(0)\n  w = f32[3,4] parameter(1)\n"
            "  ROOT y = f32[2,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    import kuiper

    model = kuiper.load_hlo(text)
    x, w = inputs.random_inputs(model.inputs, batch=1)
    assert x.shape == (2, 3) and w.shape == (3, 4)


def test_threads_limit_with_threadpoolctl_is_undone_after_the_command(capsys):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [pool["num_threads"] for pool in threadpoolctl.threadpool_info()]
    code = cli.main(["bench", str(FIXTURE), "--runs", "1", "--warmup", "0", "--compare", "none", "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 0
    if before:
        assert "numpy thread pools:" in out and " 1" in out
    assert [pool["num_threads"] for pool in threadpoolctl.threadpool_info()] == before


def test_pause_sleeps_before_every_run_outside_the_timed_span():
    calls, sleeps = [], []
    clock = FakeClock(0.001)
    samples = timing.interleaved_timings([fake_engine("a", calls), fake_engine("b", calls)], runs=2, warmup=1,
                                        pause=0.25, clock=clock, sleep=sleeps.append)
    assert sleeps == [0.25] * 6  # 3 rounds x 2 engines
    assert all(s == pytest.approx(0.001) for values in samples.values() for s in values)


def test_profile_lists_op_types_and_the_slowest_ops(monkeypatch, capsys):
    hide_module(monkeypatch, "torch")
    hide_module(monkeypatch, "onnxruntime")
    code, out, _ = bench_main(capsys, "--profile")
    assert code == 0
    assert "kuiper per-op profile" in out
    type_line = next(line for line in out.splitlines() if line.strip().startswith("Conv2d"))
    assert "(1 ops)" in type_line and "100.0%" in type_line  # the fixture's only op
    # The model's batch dim is symbolic: shown as '?', as `kuiper info` does, not as Python's None.
    assert any(line.strip().startswith("op ") and "input (?, 4, 7, 7)" in line for line in out.splitlines())


def test_profile_names_each_providers_partitions_and_the_ops_they_ran():
    import kuiper

    model = kuiper.load(MODELS / "transformer_encoder" / "model.pnnx.param")  # two dense chains (MLPs)
    samples = {index: [0.001] for index in range(len(model.steps))}
    lines = op_profile.format_profile(model, samples)
    partition_line = next(line for line in lines if line.strip().startswith("Partition (dense-chain)"))
    assert "(2 partitions, 4 ops)" in partition_line
    ops = len(model.steps) + 2  # each partition stands for two Linear layers
    assert f"{ops} ops in {len(model.steps)} steps" in lines[1] and "4 ops ran in 2 provider partitions" in lines[1]
    assert "; 0 steps ran a specialized forward" in lines[1]  # not run yet
    data = np.random.default_rng(0).standard_normal((2, 6, 16)).astype(np.float32)
    model(data)
    specialized = model.plan.specialized_count()
    assert 0 < specialized <= len(model.steps)
    assert f"; {specialized} steps ran a specialized forward" in op_profile.format_profile(model, samples)[1]
    assert op_profile.format_profile(model, samples)[2].startswith("  memory plan: none")  # not recorded yet
    model(data)  # the second call records the plan
    plan = next(iter(model.plan.memory_plans.values()))
    planned = len({request.step for request in plan.requests})
    assert 0 < planned < len(model.steps)
    assert (f"memory plan: {planned} of {len(model.steps)} steps take their results from an arena of "
            f"{plan.nbytes / 2**20:.2f} MiB") in op_profile.format_profile(model, samples)[2]


def test_profile_steps_time_every_step_in_every_round():
    import kuiper

    model = kuiper.load(FIXTURE / "model.pnnx.param")
    samples = op_profile.profile_steps(model, inputs.random_inputs(model.inputs, batch=2), rounds=3)
    assert {index: len(s) for index, s in samples.items()} == {index: 3 for index in range(len(model.steps))}


@pytest.mark.parametrize(("argv", "expected_pause"), [
    (["--compare", "torch"], command.PEER_PAUSE_MS / 1e3),  # a peer: its idle threads get time to stop
    (["--compare", "none"], 0.0),  # kuiper alone, back to back
    (["--compare", "torch", "--pause", "0"], 0.0),  # the user's choice wins
    (["--compare", "none", "--pause", "25"], 0.025),
])
def test_bench_pauses_before_each_run_only_when_peers_are_timed(monkeypatch, capsys, argv, expected_pause):
    monkeypatch.setattr(command, "load_peer_first", lambda name: False)
    monkeypatch.setattr(command, "torch_engine", lambda path, inputs, threads: fake_engine("torch", [], None))
    monkeypatch.setattr(command, "peer_file", lambda param, suffix: param)
    seen = {}
    real_run = command.run_benchmark

    def run_without_peers(engines, *args, pause, **kwargs):
        seen["pause"] = pause
        return real_run(engines[:1], *args, pause=0.0, **kwargs)  # the fake peer has no outputs to compare

    monkeypatch.setattr(command, "run_benchmark", run_without_peers)
    code, out, _ = bench_main(capsys, *argv)
    assert code == 0
    assert seen["pause"] == pytest.approx(expected_pause)
    assert ("ms pause before each run" in out) == (expected_pause > 0)


def test_onnxruntime_peer_stops_its_idle_threads_spinning_after_each_run(monkeypatch, tmp_path):
    """ORT's idle workers would spin on through the next engine's run, on the cores it needs."""
    entries = {}

    class SessionOptions:
        def add_session_config_entry(self, key, value):
            entries[key] = value

    class Input:
        name = "in0"

    class InferenceSession:
        def __init__(self, path, options, providers):
            self.options = options

        def get_inputs(self):
            return [Input()]

        def run(self, names, feeds):
            return [feeds["in0"] * 2]

    fake = types.ModuleType("onnxruntime")
    fake.__version__ = "0.0-fake"
    fake.SessionOptions, fake.InferenceSession = SessionOptions, InferenceSession
    monkeypatch.setitem(sys.modules, "onnxruntime", fake)
    model_file = tmp_path / "model.onnx"
    model_file.write_bytes(b"")
    engine = peers.onnxruntime_engine(model_file, [np.ones(3, np.float32)], threads=2)
    assert entries == {"session.force_spinning_stop": "1"}
    assert "no idle spin" in engine.label
    np.testing.assert_array_equal(engine.call()[0], np.full(3, 2, np.float32))
