#!/usr/bin/env python3
"""Where the chain providers pay (kuiper/numba_kernels/chains.py, LAYER_CALL_WORK): two layers + ReLU, written
as PNNX text from seeded weights, timed with providers on and off in one process, 1 thread, 150 alternating
calls each (p10).  A ratio below 1 means the compiled chain is faster than the layers' own ops.

  python3 tools/measure_chain_thresholds.py

Needs no torch (the models are written here; tests/conftest.py's writers).
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import kuiper  # noqa: E402
from conftest import param_text, write_model  # noqa: E402

rng = np.random.default_rng(0)


def dense(tmp, rows, width, layers=2):
    lines = [f"pnnx.Input in0 0 1 v0 #v0=({rows},{width})f32"]
    blobs = {}
    for i in range(layers):
        lines.append(
            f"nn.Linear l{i} 1 1 v{2 * i} y{i} bias=True in_features={width} out_features={width} @weight=({width},{width})f32 @bias=({width})f32"
        )
        lines.append(f"nn.ReLU a{i} 1 1 y{i} v{2 * i + 2}")
        blobs[f"l{i}.weight"] = rng.uniform(-0.1, 0.1, (width, width)).astype(np.float32).tobytes()
        blobs[f"l{i}.bias"] = rng.uniform(-0.1, 0.1, width).astype(np.float32).tobytes()
    lines.append(f"pnnx.Output o 1 0 v{2 * layers}")
    return write_model(tmp, param_text("\n".join(lines)), blobs, name=f"d{rows}_{width}"), (rows, width)


def conv(tmp, c, s, layers=2):
    lines = [f"pnnx.Input in0 0 1 v0 #v0=(1,{c},{s},{s})f32"]
    blobs = {}
    for i in range(layers):
        lines.append(
            f"nn.Conv2d c{i} 1 1 v{2 * i} y{i} bias=True dilation=(1,1) groups=1 in_channels={c} kernel_size=(3,3) out_channels={c} padding=(1,1) padding_mode=zeros stride=(1,1) @weight=({c},{c},3,3)f32 @bias=({c})f32"
        )
        lines.append(f"nn.ReLU a{i} 1 1 y{i} v{2 * i + 2}")
        blobs[f"c{i}.weight"] = rng.uniform(-0.1, 0.1, (c, c, 3, 3)).astype(np.float32).tobytes()
        blobs[f"c{i}.bias"] = rng.uniform(-0.1, 0.1, c).astype(np.float32).tobytes()
    lines.append(f"pnnx.Output o 1 0 v{2 * layers}")
    return write_model(tmp, param_text("\n".join(lines)), blobs, name=f"c{c}_{s}"), (1, c, s, s)


def compare(path, shape, label, work):
    on, off = kuiper.load(path, threads=1), kuiper.load(path, threads=1, providers=False)
    claimed = any(st.node.type == "Partition" for st in on.steps)
    x = rng.standard_normal(shape).astype(np.float32)
    for m in (on, off):
        m(x)
        m(x)
    a, b = [], []
    for _ in range(150):
        t = time.perf_counter()
        on(x)
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        off(x)
        b.append(time.perf_counter() - t)
    pa, pb = np.percentile(a, 10) * 1e6, np.percentile(b, 10) * 1e6
    print(
        f"{label:14s} layer work {work:>8d} claimed {claimed!s:5s} chain {pa:7.1f} us  ops {pb:7.1f} us  ratio {pa / pb:5.2f}",
        flush=True,
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for rows, width in [
            (1, 32),
            (1, 64),
            (1, 128),
            (1, 256),
            (4, 64),
            (10, 64),
            (20, 64),
            (4, 128),
            (10, 128),
            (20, 128),
        ]:
            p, sh = dense(d, rows, width)
            compare(p, sh, f"dense {rows}x{width}", rows * width * width)
        for c, s in [(8, 8), (16, 8), (8, 16), (16, 16), (32, 8), (4, 28), (32, 16)]:
            p, sh = conv(d, c, s)
            compare(p, sh, f"conv {c}ch {s}x{s}", c * c * 9 * s * (s + 2))


if __name__ == "__main__":
    main()
