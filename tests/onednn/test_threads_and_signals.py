"""oneDNN under a profiler's timer signal, and under threads that come and go (issue 49).

oneDNN 3.2's AVX-512 GEMM kernel keeps data below the stack pointer, where a signal handler running
on the thread's stack writes: a model called in a loop while ``SIGPROF`` fired aborted within about a
second ("free(): invalid next size").  Each thread that runs oneDNN now has an alternate signal stack
(kuiper/onednn/signal_stack.py).  The loop runs in a subprocess, so a crash fails the test instead of
killing pytest.  And each calling thread's stream and memory objects used to stay for the model's
life: 1,000 short-lived threads left 5,000 memory objects and 1,000 streams behind.
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.onednn import signal_stack

from conftest import param_text, write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

# A small conv: oneDNN runs it on its plain-layout GEMM kernel, the one that crashed, on the calling thread.
CONV = """
pnnx.Input in0 0 1 x #x=(1,12,20,20)f32
nn.Conv2d c 1 1 x y bias=True kernel_size=(3,3) in_channels=12 out_channels=24 padding=(1,1) @weight=(24,12,3,3)f32 @bias=(24)f32
pnnx.Output out 1 0 y
"""
RNG = np.random.default_rng(49)
WEIGHTS = {"c.weight": RNG.standard_normal((24, 12, 3, 3)).astype(np.float32).tobytes(),
           "c.bias": RNG.standard_normal(24).astype(np.float32).tobytes()}


def _model(tmp_path):
    return kuiper.load(write_model(tmp_path, param_text(CONV), WEIGHTS))


def test_a_model_called_while_a_profiler_timer_fires_neither_crashes_nor_errs(tmp_path):
    """Every 0.2 ms of CPU time a SIGPROF with a Python handler, for 3 s of calls: before, the process
    aborted within about a second."""
    path = write_model(tmp_path, param_text(CONV), WEIGHTS)
    script = textwrap.dedent(f"""
        import signal, time
        import numpy as np
        import kuiper
        model = kuiper.load({str(path)!r})
        x = np.random.default_rng(0).standard_normal((1, 12, 20, 20)).astype(np.float32)
        want = model(x).copy()
        hits = []
        signal.signal(signal.SIGPROF, lambda signum, frame: hits.append(1))
        signal.setitimer(signal.ITIMER_PROF, 0.0002, 0.0002)
        end, calls, wrong = time.monotonic() + 3, 0, 0
        while time.monotonic() < end:
            calls += 1
            wrong += not np.array_equal(model(x), want)
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        print(calls, len(hits), wrong)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    calls, signals, wrong = map(int, done.stdout.split())
    assert signals > 50 and calls > 100 and wrong == 0, done.stdout


def _alternate_stack_in_use() -> bool:
    current = signal_stack._Stack()
    assert signal_stack._sigaltstack()(None, ctypes.byref(current)) == 0
    return not current.ss_flags & signal_stack.SS_DISABLE


def test_a_thread_running_onednn_gets_an_alternate_signal_stack_and_gives_it_up(tmp_path):
    model = _model(tmp_path)
    x = np.ones((1, 12, 20, 20), np.float32)
    seen = {}

    def call():
        seen["before"] = _alternate_stack_in_use()
        model(x)
        seen["during"] = _alternate_stack_in_use()

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert seen == {"before": False, "during": True}


@pytest.fixture
def live_objects(monkeypatch):
    """{"memory": n, "stream": n, "memory made": n}: oneDNN memory objects and streams made less those
    destroyed from now on, and the memory objects made (the loaded library's functions wrapped; it is
    loaded once per process)."""
    counts = {"memory": 0, "stream": 0, "memory made": 0}
    library = onednn.library()
    for name, key, step in (("memory_create", "memory", 1), ("memory_destroy", "memory", -1),
                            ("stream_create", "stream", 1), ("stream_destroy", "stream", -1)):
        function = getattr(library, name, None)
        if function is None:
            continue  # a library without it (stream_destroy before issue 49) counts the rest
        def counted(*args, function=function, key=key, step=step):
            counts[key] += step
            counts[f"{key} made"] = counts.get(f"{key} made", 0) + max(step, 0)
            return function(*args)

        monkeypatch.setattr(library, name, counted)
    return counts


def test_threads_that_come_and_go_leave_no_onednn_objects_behind(tmp_path, live_objects):
    model = _model(tmp_path)
    x = np.ones((1, 12, 20, 20), np.float32)
    want = model(x)
    gc.collect()
    after_one_thread = dict(live_objects)
    results = []
    for _ in range(2000):
        thread = threading.Thread(target=lambda: results.append(model(x)))
        thread.start()
        thread.join()
    gc.collect()
    assert len(results) == 2000 and all(np.array_equal(r, want) for r in results[::100])
    assert live_objects["memory made"] - after_one_thread["memory made"] >= 2000  # each thread ran on oneDNN
    # Before: 2,000 threads left 10,000 memory objects and 2,000 streams.
    assert live_objects["stream"] <= after_one_thread["stream"]
    assert live_objects["memory"] <= after_one_thread["memory"]
