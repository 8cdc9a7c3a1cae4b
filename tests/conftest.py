"""Shared test helpers: fixture models and the backends available on this machine."""

from __future__ import annotations

import importlib
import itertools
import os
import sys
import tempfile
import weakref
from pathlib import Path

# CuPy's kernel cache goes to a throwaway folder during tests (users keep their default).
os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="kuiper-cupy-cache-")

import numpy as np
import pytest

import kuiper
from kuiper import plugins
from kuiper.formats.pnnx_ops import translate
from kuiper.formats.pnnx_param import parse_param
from kuiper.model_ir import OpNode
from kuiper.testing import backend_params

FIXTURES = Path(__file__).parent / "fixtures"
MODELS = FIXTURES / "models"


@pytest.fixture(params=backend_params())
def backend_name(request):
    return request.param


def model_dir(name: str) -> Path:
    return MODELS / name


def reference_batches(name: str) -> dict[str, dict[str, list[np.ndarray]]]:
    """{"b1": {"inputs": [...], "outputs": [...]}, "b3": ...} from the fixture's ref.npz."""
    ref = np.load(model_dir(name) / "ref.npz")
    batches: dict[str, dict[str, list]] = {}
    for key in sorted(ref.files):
        batch, _, rest = key.partition("_")
        kind = "inputs" if rest.startswith("input") else "outputs"
        index = int(rest[len("input"):] if kind == "inputs" else rest[len("output"):])
        entry = batches.setdefault(batch, {"inputs": [], "outputs": []})
        items = entry[kind]
        while len(items) <= index:
            items.append(None)
        items[index] = ref[key]
    return batches


def float64_outputs(name: str) -> dict[str, list[np.ndarray]]:
    """{"b2": [outputs...], ...}: PyTorch's float64 outputs (tools/make_float64_references.py), where
    the fixture has them (ref64.npz); {} where it does not."""
    path = model_dir(name) / "ref64.npz"
    if not path.exists():
        return {}
    ref = np.load(path)
    outputs: dict[str, list] = {}
    for key in sorted(ref.files, key=lambda key: (key.split("_")[0], int(key.rsplit("output", 1)[1]))):
        outputs.setdefault(key.split("_")[0], []).append(ref[key])
    return outputs


# Where PyTorch's float64 output is saved (ref64.npz: ill-conditioned fixtures, whose float32 outputs
# are themselves far from the exact answer), a result that misses PyTorch's float32 by more than
# the tolerance still passes if it is at most this many times as far from the float64 answer as
# PyTorch's float32 is: another summation order (cuBLAS on a GPU) rounds differently, not worse.
FLOAT32_SPREAD = 4


def assert_close_to_pytorch(got, want, where, exact=None):
    """A model's output against PyTorch's saved one: the accuracy bar of every fixture test, on every backend."""
    got = kuiper.to_numpy(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != PyTorch {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    scale = float(np.abs(want).max()) if want.size else 0.0
    tolerance = 1e-4 if scale <= 10 else 1e-5 * scale
    error = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
    if error <= tolerance or exact is None:
        assert error <= tolerance, f"{where}: max abs error {error:.3g} > {tolerance:.3g}"
        return
    pytorch_error = float(np.abs(want.astype(np.float64) - exact).max())
    our_error = float(np.abs(got.astype(np.float64) - exact).max())
    assert our_error <= FLOAT32_SPREAD * pytorch_error, (
        f"{where}: max abs error {error:.3g} > {tolerance:.3g} from PyTorch's float32, and {our_error:.3g} from its "
        f"float64 output, more than {FLOAT32_SPREAD} times PyTorch's float32 ({pytorch_error:.3g})")


# A hand-written one-op model for the bad-input tests: nn.Linear 3 -> 2 with W = [[0,1,2],[3,4,5]]
# and b = [1,1], so that x = [1,2,3] gives [0+2+6+1, 3+8+15+1] = [9, 27] by hand.
LINEAR = (
    "7767517\n3 2\n"
    "pnnx.Input in0 0 1 x #x=(1,3)f32\n"
    "nn.Linear fc 1 1 x y bias=True in_features=3 out_features=2 @bias=(2)f32 @weight=(2,3)f32 #x=(1,3)f32 #y=(1,2)f32\n"
    "pnnx.Output out 1 0 y\n"
)
LINEAR_W = np.arange(6, dtype="<f4")
LINEAR_WEIGHTS = {"fc.weight": LINEAR_W.tobytes(), "fc.bias": np.ones(2, "<f4").tobytes()}


def write_model(tmp_path: Path, param_text: str, weights: dict[str, bytes] | None = None, name: str = "m") -> Path:
    """Write a hand-made .pnnx.param (and a stored-zip .pnnx.bin when weights are given).

    ``op_model`` below gives every model its own name.
    """
    import zipfile

    param = tmp_path / f"{name}.pnnx.param"
    param.write_text(param_text)
    if weights is not None:
        with zipfile.ZipFile(tmp_path / f"{name}.pnnx.bin", "w", compression=zipfile.ZIP_STORED) as archive:
            for entry, data in weights.items():
                archive.writestr(entry, data)
    return param


def memory_freed_ref(array: np.ndarray) -> weakref.ref:
    """A weak reference to the array owning ``array``'s memory: dead once nothing holds that memory (the
    caller must drop its own ``array`` too)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return weakref.ref(array)


def param_text(body: str) -> str:
    """A .pnnx.param's text for ``body``, one op per line (indentation dropped): the magic number,
    then the op count and the operand count, which is taken from the operand words of each line."""
    lines = [line.strip() for line in body.strip().splitlines()]
    operands = len({word for line in lines for word in line.split()[4:] if "=" not in word})
    return f"7767517\n{len(lines)} {operands}\n" + "\n".join(lines) + "\n"


_MODEL_NUMBERS = itertools.count()


def pnnx_node(op_type: str, name: str, inputs: list[str], outputs: list[str], params=None, attrs=None,
              input_keys=None) -> OpNode:
    """An OpNode as the PNNX frontend hands it on: ``op_type`` is PNNX's spelling (``nn.Conv2d``),
    translated to the canonical op type and typed params as a loaded file would be."""
    return translate(OpNode(op_type, name, list(inputs), list(outputs), dict(params or {}), dict(attrs or {}),
                            list(input_keys or [])))


def pnnx_file_ops(param_path: Path) -> list[OpNode]:
    """The ops of a .pnnx.param as the file spells them (before the frontend's translation), for tests
    that check which PNNX types a fixture contains."""
    return parse_param(Path(param_path).read_text(), str(param_path)).ops


def op_model(tmp_path: Path, op_line: str, inputs=("x",), outputs=("y",), weights=None, backend="numpy", fuse=True):
    """Load a one-op model: a pnnx.Input per name in ``inputs``, ``op_line``, a pnnx.Output per name in ``outputs``.

    ``weights`` ({attr: array}) become the op's ``@attr`` items (f32) and its .pnnx.bin entries.
    """
    weights = weights or {}
    op_name = op_line.split()[1]
    attrs = " ".join(f"@{key}=({','.join(map(str, np.shape(value)))})f32" for key, value in sorted(weights.items()))
    lines = [f"pnnx.Input in{i} 0 1 {name}" for i, name in enumerate(inputs)]
    lines.append(f"{op_line} {attrs}".rstrip())
    lines += [f"pnnx.Output out{i} 1 0 {name}" for i, name in enumerate(outputs)]
    text = f"7767517\n{len(lines)} {len(inputs) + len(outputs)}\n" + "\n".join(lines) + "\n"
    blobs = {f"{op_name}.{key}": np.asarray(value, "<f4").tobytes() for key, value in weights.items()}
    param = write_model(tmp_path, text, blobs or None, name=f"m{next(_MODEL_NUMBERS)}")
    return kuiper.load(param, backend=backend, fuse=fuse)


@pytest.fixture(params=["serial", "parallel"])
def kernel_variant(request, monkeypatch):
    """Run a test with both builds of each compiled kernel (kuiper.numba_kernels.runtime.Kernel):
    the serial one (small work) and the parallel one (forced: zero threshold, two threads)."""
    from kuiper.numba_kernels import runtime

    if request.param == "parallel":
        monkeypatch.setattr(runtime, "PARALLEL_WORK", 0)
        runtime.set_threads(2)
    else:
        monkeypatch.setattr(runtime, "PARALLEL_WORK", 1 << 62)
    yield request.param
    runtime.set_threads(None)


@pytest.fixture(params=["compiled", "onednn"])
def conv_engine(request, monkeypatch):
    """Build the compiled convs of a test twice: on the Numba/BLAS paths (oneDNN hidden), and on
    oneDNN (skipped where it is not installed)."""
    from kuiper import onednn

    if request.param == "compiled":
        monkeypatch.setattr(onednn, "library", lambda: None)
    elif not onednn.available():
        pytest.skip(onednn.describe())
    return request.param


@pytest.fixture
def install_distribution(tmp_path, monkeypatch):
    """``install_distribution(module, source, {entry point: target})``: a one-module distribution
    with ``kuiper`` entry points, found the way pip-installed plugins are (a dist-info folder on
    sys.path), and a fresh plugin manager that loads it."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    modules = []

    def install(module: str, source: str, entry_points: dict[str, str]) -> None:
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (site / f"{module}.py").write_text(source)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text("[kuiper]\n" + lines)
        modules.append(module)
        importlib.invalidate_caches()
        plugins.plugin_manager.cache_clear()
        plugins.reset_registries()

    yield install
    for module in modules:
        sys.modules.pop(module, None)
    plugins.plugin_manager.cache_clear()
    plugins.reset_registries()


@pytest.fixture
def register_plugin():
    """``register_plugin(plugin, name)`` adds a plugin object for one test; all are removed after it."""
    added = []

    def register(plugin, name):
        plugins.plugin_manager().register(plugin, name=name)
        plugins.reset_registries()
        added.append(name)

    yield register
    for name in reversed(added):
        plugins.plugin_manager().unregister(name=name)
    plugins.reset_registries()
