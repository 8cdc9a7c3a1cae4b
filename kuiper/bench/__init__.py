"""``kuiper bench``: time a model in kuiper and, when installed, in PyTorch and ONNX Runtime.

All engines run in ONE process on the SAME input, interleaved round-robin (one
run of each per round) after a warm-up, so that slow drifts of the machine
(frequency, other load) hit every engine alike.  Peers are optional: PyTorch
runs the TorchScript ``model.pt`` that pnnx writes beside ``model.pnnx.param``,
ONNX Runtime a ``model.onnx`` beside it (or ``--onnx``).  A peer that is not
installed, has no file or fails to run is reported in one line and skipped.

Threads: ``--threads T`` loads the kuiper model with ``kuiper.load(threads=T)`` and
sets torch.set_num_threads, ONNX Runtime's intra_op_num_threads and, through
threadpoolctl when it is installed, the BLAS/OpenMP pools numpy uses.  Without threadpoolctl numpy's BLAS pool cannot
be resized once numpy is imported: start the process with
``OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T`` instead (the report says so).

``--memory`` also starts one fresh process per engine that loads the model and
runs it once, and reports its peak resident memory (VmHWM), load and first-run time, and its
start-up (from launch to the end of the first run, wall and CPU time); kuiper gets a second
row with its Numba kernels off (``KUIPER_NUMBA=0``), since Numba's import and cache loading are
most of its start-up.

One job per module:

- ``inputs``: the model file, the peer files beside it, seeded random inputs;
- ``engines``: kuiper as an engine, and the ``--compare`` option;
- ``peers``: PyTorch and ONNX Runtime, and the ``Engine`` interface all three share;
- ``timing``: interleaved rounds and their statistics;
- ``agreement``: whether a peer's outputs match kuiper's beyond float32 noise;
- ``run``: check the outputs once, then time the engines;
- ``report``: what a run found, as a table;
- ``op_profile``: kuiper's time op by op (``--profile``);
- ``fresh_process``: peak memory and start-up of one fresh process per engine (``--memory``),
  each running ``fresh_child`` by path;
- ``machine``: thread pools and load of the machine around the timings;
- ``command``: the ``kuiper bench`` subcommand.
"""

from __future__ import annotations

from .command import add_bench_command, cmd_bench
from .inputs import random_inputs

__all__ = ["add_bench_command", "cmd_bench", "random_inputs"]
