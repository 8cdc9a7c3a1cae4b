"""Helpers that turn a small PyTorch module into a checked-in kuiper test fixture.

A fixture is a folder ``<outdir>/<name>/`` holding:

* ``model.pnnx.param`` and ``model.pnnx.bin``: what PNNX exported; the files kuiper loads.
* ``ref.npz``: ``b{B}_input{i}`` / ``b{B}_output{j}`` float32 arrays, the eager PyTorch
  outputs for seeded inputs at every batch size B the fixture promises to support.
* ``meta.json``: shapes per batch, tool versions, a one-line description.

Tests never import torch; they only read these files. Everything here is seeded and the
zip containers are written with fixed timestamps, so regenerating gives identical bytes
on the same machine (and identical numbers up to float rounding elsewhere).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed zip timestamp: reruns must not churn git
# Kept only with keep_peers, for benchmarks: pnnx's TorchScript trace and its .pnnx.onnx.
# The .pnnx.onnx is NOT runnable ONNX (its nodes are pnnx ops such as nn.Conv2d), so
# keep_peers also writes a standard fp32 ``model.onnx`` (dynamic batch) for onnxruntime.
PEER_SUFFIXES = (".pt", ".pnnx.onnx")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one fixture model.

    ``input_shapes`` are the export shapes; dim 0 of every input is the batch. The same
    graph is also run (in the reference data) at each of ``extra_batches``, because a
    PNNX graph exported at batch 1 is expected to work at other batch sizes.
    ``dynamic_batch`` exports with PNNX's second input set (``inputs2``) at that batch,
    which makes PNNX write ``?`` for the batch dimension and keep reshapes batch-free.
    ``full`` marks big variants that are never written to tests/fixtures.
    ``input_dtypes`` (one entry per input, empty = all float32) lets an input be integer
    indices: ``("int64", high)`` draws uniform ints in [0, high), e.g. for nn.Embedding.
    ``pnnx_py_check=False`` skips the self-check against pnnx's generated Python, only where
    that Python is known wrong while the .pnnx.param is fine (the description says why);
    the tests still compare kuiper with eager PyTorch.
    """

    build: Callable[[], torch.nn.Module]
    input_shapes: tuple[tuple[int, ...], ...]
    description: str
    extra_batches: tuple[int, ...] = (3,)
    dynamic_batch: int | None = None
    full: bool = False
    seed: int = 0
    input_dtypes: tuple = ()
    pnnx_py_check: bool = True
    exact_dtypes: bool = False


# ---------------------------------------------------------------- inputs and npz


def make_inputs(shapes: Sequence[Sequence[int]], batch: int, seed: int,
                dtypes: Sequence = ()) -> list[np.ndarray]:
    """Standard-normal float32 inputs with dim 0 set to ``batch``.

    Seeded by (seed, batch, input index) so that adding a batch size or an input does
    not change the numbers of the others. ``dtypes[i] == ("int64", high)`` makes input i
    uniform integers in [0, high) instead (see ``ModelSpec.input_dtypes``), and
    ``(dtype, low, high)`` uniform integers in [low, high) (``"bool"`` with (0, 2) gives masks).
    """
    out = []
    for i, shape in enumerate(shapes):
        rng = np.random.default_rng([seed, batch, i])
        kind = dtypes[i] if i < len(dtypes) else "float32"
        if kind == "float32":
            out.append(rng.standard_normal((batch, *shape[1:]), dtype=np.float32))
        else:
            dtype, *bounds = kind
            low, high = bounds if len(bounds) == 2 else (0, bounds[0])
            out.append(rng.integers(low, high, size=(batch, *shape[1:])).astype(dtype))
    return out


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like ``np.savez_compressed`` but byte-reproducible (fixed zip timestamps)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def flatten_outputs(out) -> list[torch.Tensor]:
    """Eager outputs in PNNX order: tuples/lists are flattened depth-first."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten_outputs(item)]
    raise TypeError(f"model output of type {type(out).__name__} is not a tensor or tuple")


@torch.no_grad()
def run_eager(module: torch.nn.Module, inputs: Sequence[np.ndarray], exact_dtypes: bool = False) -> list[np.ndarray]:
    """Outputs as float32; with ``exact_dtypes`` integer and bool outputs keep their dtype.

    torch.imag of a conjugate view is a lazily negated view: resolve_neg makes it plain.
    """
    outs = flatten_outputs(module(*[torch.from_numpy(x.copy()) for x in inputs]))
    outs = [o.resolve_neg() for o in outs]
    return [(o if exact_dtypes and not o.is_floating_point() else o.float()).detach().numpy().copy() for o in outs]


# ---------------------------------------------------------------- pnnx export


@contextlib.contextmanager
def _quiet(logpath: Path):
    """Send fds 1/2 to a log file: pnnx and torch.jit.trace are chatty."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(logpath, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def pnnx_export(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor], dest: Path,
                stem: str = "model", inputs2: Sequence[torch.Tensor] | None = None,
                keep_peers: bool = False, check: Callable[[Path], None] | None = None) -> Path:
    """Export with pnnx in a temp folder and copy only ``<stem>.pnnx.param/.bin`` to ``dest``.

    pnnx runs its converter as a subprocess and ignores its exit status, so a failed
    conversion is only visible as missing files: we check for them and show the log.
    ``check(tmpdir)`` runs while pnnx's other outputs (e.g. ``model_pnnx.py``) still exist.
    Returns the path of the copied ``.pnnx.param``.
    """
    import pnnx

    with tempfile.TemporaryDirectory(prefix="kuiper-pnnx-") as tmp:
        tmpdir = Path(tmp)
        ptpath = tmpdir / "model.pt"
        log = tmpdir / "pnnx.log"
        module.eval()
        with _quiet(log):
            # fp16=False: only changes pnnx's onnx/ncnn peers (kept f32); .pnnx.bin is f32 anyway
            try:
                pnnx.export(module, str(ptpath), tuple(example_inputs),
                            inputs2=None if inputs2 is None else tuple(inputs2), fp16=False)
            except SyntaxError:
                # pnnx.export ends by importing its generated Python, which cannot spell some
                # ops (aten::addcmul); the files are written by then (checked below).
                pass
            onnx_note = export_onnx(module, example_inputs, tmpdir / "model.onnx") if keep_peers else None
        if onnx_note:
            print(f"note: no model.onnx peer: {onnx_note}", file=sys.stderr)
        wanted = [".pnnx.param", ".pnnx.bin", *(PEER_SUFFIXES if keep_peers else ())]
        if keep_peers and (tmpdir / "model.onnx").exists():
            wanted.append(".onnx")
        missing = [f"model{s}" for s in wanted if not (tmpdir / f"model{s}").exists()]
        if missing:
            raise RuntimeError(f"pnnx did not write {missing}; its log:\n{log.read_text()[-4000:]}")
        if check is not None:
            check(tmpdir)  # before copying: a failed check must not leave files behind
        dest.mkdir(parents=True, exist_ok=True)
        for suffix in wanted:
            shutil.copyfile(tmpdir / f"model{suffix}", dest / f"{stem}{suffix}")
    return dest / f"{stem}.pnnx.param"


def export_onnx(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor], path: Path) -> str | None:
    """Standard ONNX (TorchScript exporter, opset 17) with dim 0 of every input/output dynamic.

    Best effort: some ops have no ONNX form (e.g. adaptive pooling to a non-divisor size);
    then the peer is skipped and the reason returned, rather than failing the fixture.
    """
    try:
        _export_onnx(module, example_inputs, path)
    except Exception as exc:  # noqa: BLE001 - any exporter failure just means "no peer"
        path.unlink(missing_ok=True)
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
    return None


def _export_onnx(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor], path: Path) -> None:
    with torch.no_grad():
        n_out = len(flatten_outputs(module(*example_inputs)))
    ins = [f"in{i}" for i in range(len(example_inputs))]
    outs = [f"out{j}" for j in range(n_out)]
    torch.onnx.export(module, tuple(example_inputs), str(path), dynamo=False, opset_version=17,
                      input_names=ins, output_names=outs,
                      dynamic_axes={n: {0: "batch"} for n in ins + outs})


def load_pnnx_py(tmpdir: Path) -> torch.nn.Module:
    """Instantiate the ``model_pnnx.py`` pnnx generated from its own param/bin.

    Running it at every batch size tells us whether the *exported graph* (not just the
    eager module) supports that batch, e.g. it catches reshapes with a baked-in batch.
    """
    spec = importlib.util.spec_from_file_location(f"pnnx_gen_{id(tmpdir)}", tmpdir / "model_pnnx.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model().float().eval()


def dump_json(obj) -> str:
    """Indented JSON, but with shape lists kept on one line so diffs stay readable."""
    text = json.dumps(obj, indent=2, sort_keys=True)
    return re.sub(r"\[[-\d,\s]*\]", lambda m: json.dumps(json.loads(m.group())), text) + "\n"


def versions() -> dict[str, str]:
    from importlib.metadata import version
    return {"torch": torch.__version__, "pnnx": version("pnnx"), "numpy": np.__version__}


def export_model(name: str, module: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                 outdir: Path, extra_batches: Sequence[int] = (3,),
                 inputs2: Sequence[torch.Tensor] | None = None, keep_peers: bool = False,
                 description: str = "", seed: int = 0, tol: float = 1e-4,
                 input_dtypes: Sequence = (), pnnx_py_check: bool = True, exact_dtypes: bool = False) -> Path:
    """Write the fixture folder ``outdir/<name>/`` (see module docstring); return it.

    Reference inputs are drawn by :func:`make_inputs` with the example inputs' shapes and
    the batch replaced. The pnnx-generated Python model is run on the same inputs as a
    self-check: if it disagrees with eager PyTorch by more than ``tol`` (relative to the
    output's scale) at some batch, the fixture would be wrong, so we raise.
    """
    module = module.eval()
    shapes = [tuple(t.shape) for t in example_inputs]
    batches = [shapes[0][0], *[b for b in extra_batches if b != shapes[0][0]]]
    folder = Path(outdir) / name
    if folder.exists():
        shutil.rmtree(folder)  # generated content only: never leave stale peers behind

    refs: dict[str, np.ndarray] = {}
    meta_batches = {}
    for b in batches:
        xs = make_inputs(shapes, b, seed, input_dtypes)
        ys = run_eager(module, xs, exact_dtypes)
        refs.update({f"b{b}_input{i}": x for i, x in enumerate(xs)})
        refs.update({f"b{b}_output{j}": y for j, y in enumerate(ys)})
        meta_batches[f"b{b}"] = {"inputs": [list(x.shape) for x in xs],
                                 "outputs": [list(y.shape) for y in ys]}

    check_err: dict[str, float] = {}

    def check(tmpdir: Path) -> None:
        gen = load_pnnx_py(tmpdir)
        for b in batches:
            xs = [refs[f"b{b}_input{i}"] for i in range(len(shapes))]
            try:
                ys = run_eager(gen, xs, exact_dtypes)
            except RuntimeError as exc:  # e.g. a reshape with the export batch baked in
                raise RuntimeError(f"{name}: pnnx graph cannot run at batch {b}: {exc}") from exc
            want = [refs[f"b{b}_output{j}"] for j in range(len(ys))]
            if [y.shape for y in ys] != [w.shape for w in want]:
                raise RuntimeError(f"{name}: pnnx graph gives shapes {[y.shape for y in ys]} "
                                   f"at batch {b}, eager gives {[w.shape for w in want]}")
            if any(y.dtype != w.dtype for y, w in zip(ys, want)):
                raise RuntimeError(f"{name}: pnnx graph gives dtypes {[y.dtype for y in ys]} at batch {b}")
            err = max(_relative_error(y, w) for y, w in zip(ys, want))
            if err > tol:
                raise RuntimeError(f"{name}: pnnx graph differs from eager by {err:.2e} at batch {b}")
            check_err[f"b{b}"] = float(f"{err:.1e}")  # coarse: keeps meta.json stable across machines

    pnnx_export(module, example_inputs, folder, inputs2=inputs2, keep_peers=keep_peers,
                check=check if pnnx_py_check else None)
    save_npz(folder / "ref.npz", refs)
    meta = {
        "name": name,
        "description": description,
        "export_batch": batches[0],
        "dynamic_batch": inputs2 is not None,
        "batches": meta_batches,
        "seed": seed,
        "pnnx_py_max_rel_err": check_err,
        "versions": versions(),
    }
    (folder / "meta.json").write_text(dump_json(meta))
    return folder


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    if want.size == 0:
        return 0.0
    got, want = got.astype(np.float64), want.astype(np.float64)  # bool and int64 outputs too
    return float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-6))


def spec(build: Callable[[], torch.nn.Module], *input_shapes: tuple[int, ...], **options) -> ModelSpec:
    """A ModelSpec written as a table row: the builder, then one shape per input, then options."""
    return ModelSpec(build=build, input_shapes=tuple(input_shapes), **options)


def small_and_full(name: str, make_small: Callable[[], torch.nn.Module], small_shape: tuple[int, ...],
                   make_full: Callable[[], torch.nn.Module], full_shape: tuple[int, ...], *, small: str, full: str,
                   calibrate_batch: int | None = None, **options) -> dict[str, ModelSpec]:
    """A model family's two specs: ``name``, the small checked-in fixture, and ``name_full`` at the
    published size (exported only by --full); ``small`` and ``full`` describe them.

    With ``calibrate_batch``, every BatchNorm gets random statistics measured on one random batch
    of that many inputs of the model's shape (randomize_batchnorm).
    """
    def builder(make, shape):
        if calibrate_batch is None:
            return make
        return lambda: randomize_batchnorm(make(), (calibrate_batch, *shape[1:]))

    return {name: spec(builder(make_small, small_shape), small_shape, description=small, **options),
            f"{name}_full": spec(builder(make_full, full_shape), full_shape, description=full, full=True, **options)}


def build_seeded(spec: ModelSpec) -> torch.nn.Module:
    """Build a spec's module under its seed (weights are part of the fixture)."""
    torch.manual_seed(spec.seed)
    return spec.build().eval()


def export_spec(name: str, spec: ModelSpec, outdir: Path, keep_peers: bool = False) -> Path:
    module = build_seeded(spec)
    dtypes = spec.input_dtypes
    example = [torch.from_numpy(x)
               for x in make_inputs(spec.input_shapes, spec.input_shapes[0][0], spec.seed, dtypes)]
    inputs2 = None
    if spec.dynamic_batch is not None:
        inputs2 = [torch.from_numpy(x) for x in make_inputs(spec.input_shapes, spec.dynamic_batch, spec.seed, dtypes)]
    return export_model(name, module, example, outdir, extra_batches=spec.extra_batches,
                        inputs2=inputs2, keep_peers=keep_peers, description=spec.description,
                        seed=spec.seed, input_dtypes=dtypes, pnnx_py_check=spec.pnnx_py_check,
                        exact_dtypes=spec.exact_dtypes)


@torch.no_grad()
def randomize_batchnorm(module: torch.nn.Module, calib_shape: Sequence[int], scale: float = 0.2) -> torch.nn.Module:
    """Give every BatchNorm random affine params and random but well-scaled running stats; returns ``module``.

    Default BN (mean 0, var 1, weight 1, bias 0) is an identity that hides folding bugs.
    Purely random stats make deep nets explode or vanish, so: randomise weight/bias,
    measure the real per-channel statistics on one random batch, then perturb them.
    """
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_(0.0, scale)
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one batch gives its exact stats
    module.train()
    module(torch.randn(*calib_shape))
    for bn in bns:
        bn.momentum = 0.1
        bn.running_mean.add_(torch.randn_like(bn.running_mean) * scale * bn.running_var.sqrt())
        bn.running_var.mul_(torch.empty_like(bn.running_var).uniform_(0.7, 1.4))
    module.eval()
    return module


# ---------------------------------------------------------------- wrappers for fixture models


class Single(torch.nn.Module):
    """Wrap one module under a readable name (nn.Sequential would name the op "0")."""

    def __init__(self, op: torch.nn.Module):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


class Fn(torch.nn.Module):
    """A parameter-free functional op, so pnnx keeps the F.* / torch.* spelling."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)
