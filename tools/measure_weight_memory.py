"""Memory cost of copying weights at load (docs/reliability.md): one 128 MiB nn.Linear, copied vs mapped.

    .venv/bin/python tools/measure_weight_memory.py

Linux only (reads /proc/self/status).  Prints load time and the growth of anonymous
(private) and file-backed resident memory for kuiper's copy policy, then for a plain
read-only memory map of the same entry with every page touched (the old policy).
"""

from __future__ import annotations

import mmap
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

import kuiper

OUT_FEATURES, IN_FEATURES = 4096, 8192


def resident() -> dict[str, int]:
    """RssAnon and RssFile in MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) // 1024 for key in ("RssAnon", "RssFile")}


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    param = folder / "m.pnnx.param"
    param.write_text(
        f"7767517\n3 2\npnnx.Input in0 0 1 x #x=(1,{IN_FEATURES})f32\n"
        f"nn.Linear fc 1 1 x y bias=False in_features={IN_FEATURES} out_features={OUT_FEATURES} "
        f"@weight=({OUT_FEATURES},{IN_FEATURES})f32\npnnx.Output out 1 0 y\n"
    )
    weight = np.random.default_rng(0).standard_normal((OUT_FEATURES, IN_FEATURES)).astype("<f4")
    with zipfile.ZipFile(folder / "m.pnnx.bin", "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("fc.weight", weight.tobytes())
    size_mib = weight.nbytes // 2**20
    del weight

    before = resident()
    start = time.perf_counter()
    model = kuiper.load(param)
    load_ms = (time.perf_counter() - start) * 1e3
    model(np.ones((1, IN_FEATURES), np.float32))
    after = resident()
    print(f"copy (kuiper): {size_mib} MiB of weights, load {load_ms:.0f} ms, "
          f"RssAnon +{after['RssAnon'] - before['RssAnon']} MiB, RssFile +{after['RssFile'] - before['RssFile']} MiB")

    before = resident()
    start = time.perf_counter()
    with open(folder / "m.pnnx.bin", "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    data_offset = 30 + len("fc.weight")  # local header + name; zipfile writes no extra field here
    array = np.frombuffer(mapped, dtype="<f4", count=OUT_FEATURES * IN_FEATURES, offset=data_offset)
    map_ms = (time.perf_counter() - start) * 1e3
    float(array.sum())  # touch every page
    after = resident()
    print(f"read-only mmap: map {map_ms:.1f} ms, RssAnon +{after['RssAnon'] - before['RssAnon']} MiB, "
          f"RssFile +{after['RssFile'] - before['RssFile']} MiB")


if __name__ == "__main__":
    main()
