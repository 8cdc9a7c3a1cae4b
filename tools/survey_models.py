#!/usr/bin/env python3
"""Export real torchvision / timm / torch.nn architectures with pnnx and compare kuiper with PyTorch.

For each model (random weights; BatchNorm/LayerNorm affine randomised and BatchNorm
statistics calibrated on a random batch, so outputs are not degenerate):

1. eager PyTorch output at batch 1, and its time (best of --repeat);
2. pnnx export into build/survey/<name>/ (gitignored), and the TorchScript module pnnx traced;
3. pnnx's own generated Python run on the same input: if it disagrees with eager, the
   export itself is wrong (a pnnx bug), whatever kuiper does;
4. kuiper: load, run, max abs error against eager, time (best of --repeat).

One JSON line per model is appended to build/survey/results.jsonl as soon as it is done,
so a long run can be stopped and resumed (done models are skipped unless --redo).
``--table`` prints the markdown table of docs/models.md from the results.

Both frameworks run single-threaded unless ``OMP_NUM_THREADS`` says otherwise (it sets
torch's, OpenBLAS's and kuiper's compiled kernels' pools alike). Times are medians of
--repeat rounds in which PyTorch and kuiper run in turn, so a drift of the machine hits both.

    /work/toolvenv/bin/python tools/survey_models.py            # every model, in order
    /work/toolvenv/bin/python tools/survey_models.py resnet18 vit_b_16
    /work/toolvenv/bin/python tools/survey_models.py --table
    OMP_NUM_THREADS=2 /work/toolvenv/bin/python tools/survey_models.py --retime --repeat 7
"""

from __future__ import annotations

import os

THREADS = int(os.environ.get("OMP_NUM_THREADS", "1"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # before numpy and torch start their pools

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "survey"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from survey_small_models import SMALL_MODELS, build_small  # noqa: E402 - found through the path above


def import_torchvision():
    """CPU torch lacks torchvision's nms kernels, whose fake registration fails on import
    unless the op schemas exist: define them first (the models are pure Python)."""
    if not hasattr(import_torchvision, "lib"):  # once per process: a namespace is defined only once
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
        import_torchvision.lib = lib  # keep the library alive
    import torchvision

    return torchvision


def tv(name, size=224, **kwargs):
    return ("torchvision", name, (1, 3, size, size), kwargs)


def tm(name, size=224, **kwargs):
    return ("timm", name, (1, 3, size, size), kwargs)


def nn_model(name, shape):
    return ("torch.nn", name, shape, {})


# Smaller inputs where the architecture allows (convnets with global pooling); transformers
# with fixed patch grids keep their size.
MODELS = [
    tv("alexnet"), tv("vgg11_bn", 160), tv("resnet18"), tv("resnet50", 160), tv("resnext50_32x4d", 160),
    tv("wide_resnet50_2", 128), tv("densenet121", 160), tv("inception_v3", 299, aux_logits=False, init_weights=True),
    tv("googlenet", 160, aux_logits=False, init_weights=True), tv("squeezenet1_1", 160), tv("shufflenet_v2_x1_0"),
    tv("mobilenet_v2"), tv("mobilenet_v3_small"), tv("mobilenet_v3_large"), tv("mnasnet0_5"),
    tv("efficientnet_b0"), tv("efficientnet_v2_s", 192), tv("regnet_x_400mf"), tv("regnet_y_400mf"),
    tv("convnext_tiny"), tv("vit_b_16"), tv("swin_t"), tv("swin_v2_t", 256), tv("maxvit_t"),
    tm("deit_tiny_patch16_224"), tm("vit_tiny_patch16_224"), tm("eva02_tiny_patch14_224"), tm("pvt_v2_b0"),
    tm("tiny_vit_5m_224"), tm("xcit_nano_12_p16_224"), tm("mobilevit_xxs", 256), tm("mobilevitv2_050", 256),
    tm("convnextv2_atto"), tm("sequencer2d_s"), tm("levit_128s"), tm("poolformer_s12"),
    tm("swin_tiny_patch4_window7_224"), tm("cait_xxs24_224"), tm("ghostnet_100"), tm("rexnet_100"),
    tm("resmlp_12_224"), tm("mixer_s16_224"), tm("edgenext_xx_small", 256), tm("fastvit_t8"), tm("repvit_m1"),
    tm("efficientformer_l1"), tm("coat_lite_tiny"), tm("convit_tiny"), tm("hgnetv2_b0"),
    tm("mobilenetv4_conv_small"), tm("regnety_002"), tm("efficientnet_lite0"),
    nn_model("nn_transformer", (1, 10, 64)), nn_model("nn_transformer_encoder", (1, 20, 64)),
    nn_model("nn_transformer_decoder", (1, 12, 64)), nn_model("nn_lstm_classifier", (1, 30, 40)),
    nn_model("nn_gru_bidir", (1, 30, 40)),
    *(nn_model(name, shape) for name, shape in SMALL_MODELS.items()),
]


class NNTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Transformer(64, 4, 2, 2, 128, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.model(x, x[:, :6])


class NNDecoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerDecoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.model = torch.nn.TransformerDecoder(layer, 2)

    def forward(self, x):
        return self.model(x, x.flip(1))


class RNNClassifier(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        if kind == "lstm":
            self.rnn = torch.nn.LSTM(40, 64, num_layers=2, batch_first=True)
        else:
            self.rnn = torch.nn.GRU(40, 48, num_layers=2, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(self.rnn.hidden_size * (2 if self.rnn.bidirectional else 1), 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def build(source, name, kwargs):
    if source == "torchvision":
        return import_torchvision().models.get_model(name, weights=None, **kwargs)
    if source == "timm":
        import_torchvision()
        import timm

        return timm.create_model(name, pretrained=False, **kwargs)
    torch.backends.mha.set_fastpath_enabled(False)  # ordinary ops in the trace
    if name in SMALL_MODELS:
        return build_small(name, import_torchvision)
    if name == "nn_transformer":
        return NNTransformer()
    if name == "nn_transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
    if name == "nn_transformer_decoder":
        return NNDecoder()
    return RNNClassifier("lstm" if "lstm" in name else "gru")


@torch.no_grad()
def randomize_norms(model, shape):
    """Random LayerNorm/GroupNorm affine; BatchNorm via fixturelib (calibrated statistics);
    zero-initialised layers (torchvision ViT's head) get random weights, or the output is all zeros."""
    from fixturelib import randomize_batchnorm

    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)) and not module.weight.any():
            torch.nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, (torch.nn.LayerNorm, torch.nn.GroupNorm)) and module.weight is not None:
            module.weight.uniform_(0.7, 1.3)
            module.bias.normal_(0.0, 0.1)
    randomize_batchnorm(model, (2,) + tuple(shape[1:]))


PAUSE_S = 0.1  # before each timed call: the previous engine's spinning workers must not steal its cores


def interleaved_medians(fns, repeat):
    """Median wall time of each function over ``repeat`` rounds that call them in turn
    (after one warm-up round), so a slow drift of the machine hits every function alike.
    PyTorch's OpenMP workers and OpenBLAS's spin for a while after a call; without the
    pause the order of the engines changed the ratios by 2x (as in `kuiper bench --pause`)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, spent in zip(fns, times):
            time.sleep(PAUSE_S)
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [float(np.median(spent)) for spent in times]


def max_error(got, want):
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - w))) for g, w in zip(got, want))


def flatten(out):
    from fixturelib import flatten_outputs

    return [t.detach().numpy() for t in flatten_outputs(out)]


def survey_one(source, name, shape, kwargs, repeat, reuse_export=False):
    import pnnx
    from fixturelib import _quiet

    record = {"name": name, "source": source, "input": list(shape), "threads": THREADS}
    torch.manual_seed(0)
    model = build(source, name, kwargs).eval()
    randomize_norms(model, shape)
    x = torch.randn(*shape)
    with torch.no_grad():
        want = flatten(model(x))
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    if reuse_export and (folder / "model.pnnx.param").exists():
        return compare(record, model, folder, x, want, repeat)
    start = time.perf_counter()
    try:
        with _quiet(folder / "pnnx.log"):
            pnnx.export(model, str(folder / "model.pt"), (x,), check_trace=False, fp16=False)
    except SyntaxError:
        pass  # pnnx imports its generated Python last; the files exist, its Python is judged below
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        record["export_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        return eager_time(record, model, x, repeat)
    record["export_s"] = round(time.perf_counter() - start, 1)
    if not (folder / "model.pnnx.param").exists():
        record["export_error"] = "pnnx wrote no .pnnx.param (see pnnx.log)"
        return eager_time(record, model, x, repeat)
    return compare(record, model, folder, x, want, repeat)


def eager_time(record, model, x, repeat):
    with torch.no_grad():
        (record["torch_s"],) = interleaved_medians([lambda: model(x)], repeat)
    return record


def compare(record, model, folder, x, want, repeat):
    """pnnx's Python and kuiper against the eager outputs ``want``; both engines' times."""
    import kuiper

    param = folder / "model.pnnx.param"
    record["pnnx_py_error"] = pnnx_python_error(folder, x, want)
    try:
        model_k = kuiper.load(param)
        feed = x.numpy()
        got = model_k(feed)
        got = got if isinstance(got, tuple) else (got,)
        record["max_abs_err"] = max_error(got, want)
        record["ref_scale"] = max(float(np.abs(w).max()) for w in want)
    except Exception as exc:  # noqa: BLE001
        record["kuiper_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return eager_time(record, model, x, repeat)
    engines = [lambda: model(x), lambda: model_k(feed)]
    traced = folder / "model.pt"  # the TorchScript module pnnx traced and saved
    if traced.exists():
        script = torch.jit.load(str(traced)).eval()
        engines.append(lambda: script(x))
    with torch.no_grad():
        medians = interleaved_medians(engines, repeat)
    record["torch_s"], record["kuiper_s"] = medians[:2]
    if len(medians) > 2:
        record["torchscript_s"] = medians[2]
    return record


def pnnx_python_error(folder, x, want):
    """Max abs error of pnnx's generated Python against eager, or a string saying why it failed."""
    path = folder / "model_pnnx.py"
    if not path.exists():
        return "no model_pnnx.py"
    cwd = os.getcwd()
    try:
        os.chdir(folder)  # it opens model.pnnx.bin by a relative path
        spec = importlib.util.spec_from_file_location(f"pnnx_{folder.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        net = module.Model().float().eval()
        with torch.no_grad():
            return max_error(flatten(net(x)), want)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        os.chdir(cwd)


def load_results():
    path = OUT / "results.jsonl"
    records = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                records[record["name"]] = record
    return records


def status(record):
    if "export_error" in record:
        return "pnnx export fails"
    py = record.get("pnnx_py_error")
    python_runs = isinstance(py, float)
    if "kuiper_error" in record:
        # pnnx's Python failing the same way (a shape error at the same op) marks a wrong export.
        same_failure = not python_runs and "SyntaxError" not in py and "Error" in record["kuiper_error"]
        return "pnnx export wrong" if same_failure else "kuiper error"
    err, scale = record["max_abs_err"], record.get("ref_scale", 1.0)
    tolerance = 1e-4 + 1e-3 * scale
    if err <= tolerance:
        return "matches"
    if python_runs and py > tolerance:
        return "pnnx export wrong"
    return "MISMATCH"


def table(records):
    header = ("| model | source | input | max abs err | output scale | kuiper / eager PyTorch | kuiper / TorchScript | "
              "eager PyTorch ms | threads | status | note |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for source, name, shape, _ in MODELS:
        record = records.get(name)
        if record is None:
            continue
        err = f"{record['max_abs_err']:.1e}" if "max_abs_err" in record else "-"
        scale = f"{record['ref_scale']:.2g}" if "ref_scale" in record else "-"
        ratio = f"{record['kuiper_s'] / record['torch_s']:.2f}" if "kuiper_s" in record else "-"
        scripted = (f"{record['kuiper_s'] / record['torchscript_s']:.2f}"
                    if "kuiper_s" in record and "torchscript_s" in record else "-")
        note = record.get("export_error") or record.get("kuiper_error") or ""
        py = record.get("pnnx_py_error")
        if isinstance(py, str):
            note = (note + "; " if note else "") + f"pnnx Python: {py}"
        elif py is not None and "max_abs_err" in record and py > 1e-3:
            note = (note + "; " if note else "") + f"pnnx Python err {py:.1e}"
        note = note.replace("|", "/").replace(str(ROOT) + "/", "")
        lines.append(f"| {name} | {source} | {'x'.join(map(str, shape[1:]))} | {err} | {scale} | {ratio} | {scripted} | "
                     f"{record['torch_s'] * 1e3:.1f} | {record.get('threads', 1)} | {status(record)} | {note} |")
    lines += ["", summary(records)]
    return "\n".join(lines)


def summary(records) -> str:
    """Median and spread of kuiper's time ratio over the timed models, against each PyTorch form."""
    parts = []
    for key, label in (("torch_s", "eager PyTorch"), ("torchscript_s", "TorchScript")):
        ratios = sorted(r["kuiper_s"] / r[key] for r in records.values() if "kuiper_s" in r and key in r)
        if ratios:
            worst = max((r["kuiper_s"] / r[key], n) for n, r in records.items() if "kuiper_s" in r and key in r)
            parts.append(f"kuiper / {label}: {len(ratios)} models, median {np.median(ratios):.2f}, "
                         f"{sum(x <= 1.0 for x in ratios)} at or below 1.0, {sum(x > 1.5 for x in ratios)} above 1.5 "
                         f"(issue 27's bar), {sum(x > 2.0 for x in ratios)} above 2.0 (worst {worst[1]} {worst[0]:.2f})")
    return "\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="models to run (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (each runs both engines once; the median is kept)")
    parser.add_argument("--redo", action="store_true", help="rerun models already in results.jsonl")
    parser.add_argument("--table", action="store_true", help="print the markdown table and exit")
    parser.add_argument("--retime", action="store_true",
                        help="rerun every listed model on its existing export (no pnnx): fresh errors and times "
                             "taken in one stretch (appended; the last line per model counts)")
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    if args.table:
        print(table(load_results()))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    done = load_results()
    wanted = [m for m in MODELS if not args.names or m[1] in args.names]
    for source, name, shape, kwargs in wanted:
        if name in done and not (args.redo or args.retime):
            continue
        if args.retime and "export_s" not in done.get(name, {}):
            continue  # nothing exported to rerun
        print(f"{name} ...", flush=True)
        try:
            record = survey_one(source, name, shape, kwargs, args.repeat, reuse_export=args.retime)
            if args.retime:
                record["export_s"] = done[name]["export_s"]
        except Exception as exc:  # noqa: BLE001 - one model must not stop the survey
            record = {"name": name, "source": source, "input": list(shape), "torch_s": float("nan"),
                      "export_error": f"survey failed: {type(exc).__name__}: {str(exc)[:200]}"}
            traceback.print_exc()
        with open(OUT / "results.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")
        print(f"  {json.dumps(record)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
