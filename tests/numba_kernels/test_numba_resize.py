"""The compiled nearest 2x upsampling (kuiper/numba_kernels/resize_native.py): every output value is the
input value at (i // 2, j // 2), NaN and infinities included, bit for bit as ``np.repeat`` gives them; any
other size, mode, dtype or rank takes the reference op, unchanged."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.numba_kernels import resize_native
from kuiper.numba_kernels.resize_native import CompiledInterpolate, CompiledUpsampleNearest
from kuiper.ops.resize import Interpolate

pytestmark = pytest.mark.usefixtures("kernel_variant")  # serial and parallel builds (conftest.py)
RNG = np.random.default_rng(5)


def _op(cls=CompiledInterpolate, op_type="Interpolate", **params):
    return cls(OpNode(op_type, "up", ["x"], ["y"], params), get_backend("numpy"))


def _map(shape=(2, 3, 5, 7), dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    if x.size:
        flat = x.reshape(-1)
        flat[0], flat[-1], flat[x.size // 3] = np.nan, np.inf, -np.inf
    return x


def _repeat(x):
    return np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)


class _Counting:
    """Stands in for the kernel module, counting the compiled calls."""

    def __init__(self, kernels):
        self.kernels = kernels
        self.calls = 0

    def nearest_2x(self, work, x, out):
        self.calls += 1
        return self.kernels.nearest_2x(work, x, out)


@pytest.fixture(params=["compiled", "numpy"])
def counted(request, monkeypatch):
    """The kernel module counting its calls, with the compiled kernel taking every 2x copy ("compiled") or
    none (NumPy's copy: outputs under COMPILED_ELEMENTS); ``counting.expected`` is the count one such copy
    makes."""
    counting = _Counting(resize_native.kernels)
    monkeypatch.setattr(resize_native, "kernels", counting)
    compiled = request.param == "compiled"
    monkeypatch.setattr(resize_native, "COMPILED_ELEMENTS", 0 if compiled else float("inf"))
    counting.expected = 1 if compiled else 0
    return counting


@pytest.mark.parametrize("params", [{"mode": "nearest", "scale_factor": [2.0, 2.0]},
                                    {"mode": "nearest", "scale_factor": 2.0, "recompute_scale_factor": True},
                                    {"mode": "nearest", "size": [10, 14]}])
def test_a_2x_nearest_map_is_every_value_copied_to_its_four_places(params, counted):
    x = _map()
    got = _op(**params).forward(x)
    assert counted.calls == counted.expected
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert got.tobytes() == _repeat(x).tobytes()


def test_a_strided_input_and_upsampling_nearest_2d_take_it_too(counted):
    x = _map((2, 3, 7, 5)).transpose(0, 1, 3, 2)
    assert _op(mode="nearest", scale_factor=2.0).forward(x).tobytes() == _repeat(x).tobytes()
    op = _op(CompiledUpsampleNearest, "UpsampleNearest", scale_factor=2.0)
    assert op.forward(x).tobytes() == _repeat(x).tobytes()
    assert counted.calls == 2 * counted.expected


@pytest.mark.parametrize("params, x", [
    ({"mode": "nearest", "scale_factor": 3.0}, _map()),
    ({"mode": "nearest", "size": [10, 13]}, _map()),
    ({"mode": "nearest-exact", "scale_factor": 2.0}, _map()),
    ({"mode": "bilinear", "scale_factor": 2.0}, _map()),
    ({"mode": "nearest", "scale_factor": 2.0}, _map(dtype=np.float64)),
    ({"mode": "nearest", "scale_factor": 2.0}, _map((2, 3, 5))),
    ({"mode": "nearest", "scale_factor": 2.0}, _map((0, 3, 5, 7))),
])
def test_anything_else_is_the_reference_op(params, x, counted, monkeypatch):
    copies = []
    monkeypatch.setattr(resize_native, "_copy_doubled", lambda *arrays: copies.append(1))  # neither 2x copy runs
    got = _op(**params).forward(x)
    assert copies == []
    want = Interpolate(OpNode("Interpolate", "up", ["x"], ["y"], params), get_backend("numpy")).forward(x)
    assert counted.calls == 0
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
