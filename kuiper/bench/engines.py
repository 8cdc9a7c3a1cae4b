"""kuiper as an engine of a benchmark, and the ``--compare`` option naming its peers (peers.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import kuiper

from ..errors import UsageError
from .peers import PEERS, Engine


def parse_compare(text: str) -> list[str]:
    """``torch,onnxruntime`` -> ["torch", "onnxruntime"]; ``none`` or empty -> []."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names in ([], ["none"]):
        return []
    aliases = {"pytorch": "torch", "ort": "onnxruntime"}
    names = [aliases.get(n, n) for n in names]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise UsageError(f"--compare: unknown peer(s) {unknown}; choose from {', '.join(PEERS)} or 'none'")
    return list(dict.fromkeys(names))


def kuiper_engine(load: Callable[[], Any], inputs: list[np.ndarray], fuse: bool, providers: bool = True) -> Engine:
    """kuiper as an engine; ``load()`` returns the model as the command's options ask (backend, ``fuse``,
    ``providers``, threads)."""
    kuiper.backends()  # plugin discovery happens once per process; keep it out of the load time
    start = time.perf_counter()
    model = load()
    load_ms = (time.perf_counter() - start) * 1e3
    backend_obj = model.backend
    device_inputs = [backend_obj.asarray(x) for x in inputs]  # a GPU backend times compute, not uploads

    def call():
        outputs = model(*device_inputs)
        backend_obj.synchronize()
        return outputs

    def to_numpy(outputs):
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return [kuiper.to_numpy(o) for o in outputs]

    fused = ("" if fuse else ", unfused") + ("" if providers else ", no providers")
    threads = "" if model.threads is None else f", {model.threads} threads"
    label = f"kuiper {kuiper.__version__} ({backend_obj.name}{fused}{threads})"
    return Engine("kuiper", label, call, to_numpy, load_ms)
