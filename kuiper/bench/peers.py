"""The peers a benchmark times, PyTorch (TorchScript) and ONNX Runtime, and the Engine every engine is wrapped in.

Each engine is loaded once and wrapped in an ``Engine`` whose ``call()`` runs the
model on the prepared input and waits for it.  A peer that cannot take part
raises ``PeerUnavailable`` with a one-line reason; the peers' libraries are
imported only here, when asked for, so kuiper never needs them.

This module imports nothing from kuiper: ``kuiper bench --memory`` runs it by path in a peer's
fresh process (fresh_child.py), which must not import kuiper, or the peer's start-up and peak
memory would include kuiper's import.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PEERS = ("torch", "onnxruntime")


class PeerUnavailable(Exception):
    """A peer cannot take part; the message says why, for a one-line report."""


@dataclass
class Engine:
    """One thing to time: ``call()`` runs the model once on the prepared input and waits for it."""

    name: str  # kuiper / torch / onnxruntime
    label: str  # what the table shows, e.g. "kuiper 0.1.0 (numpy)"
    call: Callable[[], Any]
    to_numpy: Callable[[Any], list[np.ndarray]]
    load_ms: float = float("nan")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, cut to 200 characters: enough for a report line."""
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _flatten_torch(value) -> list:
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flatten_torch(item)]
    return [value]


def _peer_library(module: str, path: Path, missing_file: str):
    """The peer's library, imported only now (kuiper never needs it), once its model file is known to exist."""
    try:
        library = importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"not installed ({exc})") from None
    if not path.exists():
        raise PeerUnavailable(f"no {missing_file}")
    return library


def load_peer_first(name: str) -> bool:
    """Import a peer library now, before kuiper loads its own native libraries; whether it is installed."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def torch_engine(path: Path, inputs: list[np.ndarray], threads: int | None) -> Engine:
    torch = _peer_library("torch", path, f"TorchScript file {path} (pnnx writes it; or pass --torchscript)")
    if threads is not None:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    try:
        module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001 - any load failure just means "no peer"
        raise PeerUnavailable(f"cannot load {path}: {type(exc).__name__}: {first_line(exc)}") from None
    load_ms = (time.perf_counter() - start) * 1e3
    tensors = [torch.from_numpy(x) for x in inputs]

    def call():
        with torch.inference_mode():
            return module(*tensors)

    def to_numpy(outputs):
        return [t.detach().cpu().numpy() for t in _flatten_torch(outputs)]

    label = f"torch {torch.__version__} (TorchScript, {torch.get_num_threads()} threads)"
    return Engine("torch", label, call, to_numpy, load_ms)


def onnxruntime_engine(path: Path, inputs: list[np.ndarray], threads: int | None) -> Engine:
    ort = _peer_library("onnxruntime", path,
                        f"ONNX file {path} (tools/make_fixtures.py --keep-peers writes it; or pass --onnx)")
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    # ORT's idle workers spin on after a run (tens of ms), on the cores the next engine in the
    # round needs: interleaved with ORT, kuiper's ResNet-18 took 38-46 ms against 15-21 alone
    # (docs/performance.md, "Engines side by side").  With this entry they spin within a run as
    # usual and go to sleep at its end; ORT alone ran at the same speed either way.
    options.add_session_config_entry("session.force_spinning_stop", "1")
    start = time.perf_counter()
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        raise PeerUnavailable(f"cannot load {path}: {type(exc).__name__}: {first_line(exc)}") from None
    load_ms = (time.perf_counter() - start) * 1e3
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise PeerUnavailable(f"{path} has {len(names)} input(s), the kuiper model {len(inputs)}")
    feeds = dict(zip(names, inputs))

    def call():
        return session.run(None, feeds)

    threads_text = f"{threads} threads" if threads is not None else "default threads"
    return Engine("onnxruntime", f"onnxruntime {ort.__version__} (CPU, {threads_text}, no idle spin)", call, list,
                  load_ms)
