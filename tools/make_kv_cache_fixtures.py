#!/usr/bin/env python3
"""Export a tiny random-weight GPT-2 with a KV cache, as Hugging Face runs it, into two fixtures.

* ``gpt2_kv_prefill``: the prompt (1, PROMPT) int64 -> logits and the cache (keys and
  values of every layer).  Hugging Face's DynamicCache starts each layer as an empty 1-D
  tensor and joins the new keys to it with ``torch.cat``: the case kuiper had to learn
  (PyTorch skips an empty 1-D tensor in ``cat``).
* ``gpt2_kv_decode``: one new token (1, 1) plus the prompt's cache -> logits and the cache
  one position longer: the step a generation loop repeats.  Its reference inputs are the
  prefill's PyTorch outputs, so a test can chain kuiper's prefill into kuiper's decode.

Both folders follow tools/make_fixtures.py's layout (model.pnnx.param/.bin, ref.npz with
``b1_input{i}``/``b1_output{j}``, meta.json), so tests/end_to_end/test_models.py checks them too.
Only batch 1 is exported: GPT-2's traced reshapes hold the batch and sequence length.

The word embedding and the output layer are NOT tied (``tie_word_embeddings=False``): with
tied weights pnnx writes the output ``nn.Linear`` with the shared weight as a second input
(``nn.Linear m.lm_head 2 1 <weight> <x>``), which its own generated Python cannot run
either.  Every weight is redrawn (GPT-2's init has zero biases and unit LayerNorms, which
would hide mistakes in those ops), seeded, so reruns give the same files.

  pip install torch pnnx transformers
  python3 tools/make_kv_cache_fixtures.py [--out tests/fixtures/models]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import fixturelib  # noqa: E402

DEFAULT_OUT = TOOLS.parent / "tests" / "fixtures" / "models"
VOCAB, LAYERS, HEADS, WIDTH, PROMPT = 64, 2, 2, 32, 5
SEED = 0
TOLERANCE = 1e-4  # pnnx's generated Python against eager PyTorch, relative to the output's scale


def tiny_gpt2() -> nn.Module:
    config = GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS,
                        bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
                        attn_implementation="eager")
    torch.manual_seed(SEED)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 0.2)
    return model


class Prefill(nn.Module):
    """ids -> (logits, k0, v0, k1, v1, ...): the first step, from an empty cache."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids):
        out = self.model(input_ids=ids, use_cache=True)
        return (out.logits, *cache_tensors(out.cache))


class Decode(nn.Module):
    """(ids, k0, v0, k1, v1, ...) -> (logits, k0', v0', ...): one step with the cache given as tensors.

    The cache is rebuilt the way Hugging Face converts a legacy tuple cache: a DynamicCache
    whose layers are filled by ``update`` (a ``torch.cat`` onto an empty 1-D tensor).
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids, *past):
        cache = DynamicCache()
        for layer in range(LAYERS):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=ids, cache=cache, use_cache=True)
        return (out.logits, *cache_tensors(out.cache))


def cache_tensors(cache) -> list[torch.Tensor]:
    return [tensor for layer in cache.layers for tensor in (layer.keys, layer.values)]


def export(name: str, module: nn.Module, inputs: list[np.ndarray], out: Path, description: str) -> list[np.ndarray]:
    """Write one fixture folder; returns the eager outputs (float32, as in ref.npz)."""
    outputs = fixturelib.run_eager(module, inputs)
    folder = out / name

    def check(tmpdir: Path) -> None:
        generated = fixturelib.run_eager(fixturelib.load_pnnx_py(tmpdir), inputs)
        for got, want in zip(generated, outputs, strict=True):
            error = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-6))
            if got.shape != want.shape or error > TOLERANCE:
                raise RuntimeError(f"{name}: pnnx's generated Python differs from eager PyTorch "
                                   f"(shapes {got.shape} / {want.shape}, relative error {error:.2e})")

    example = [torch.from_numpy(x) for x in inputs]
    fixturelib.pnnx_export(module, example, folder, check=check)
    refs = {f"b1_input{i}": x for i, x in enumerate(inputs)}
    refs.update({f"b1_output{j}": y for j, y in enumerate(outputs)})
    fixturelib.save_npz(folder / "ref.npz", refs)
    meta = {
        "name": name,
        "description": description,
        "export_batch": 1,
        "dynamic_batch": False,
        "batches": {"b1": {"inputs": [list(x.shape) for x in inputs], "outputs": [list(y.shape) for y in outputs]}},
        "seed": SEED,
        "versions": {**fixturelib.versions(), "transformers": transformers.__version__},
    }
    (folder / "meta.json").write_text(fixturelib.dump_json(meta))
    return outputs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder that receives the two fixture folders")
    args = parser.parse_args(argv)

    model = tiny_gpt2()
    rng = np.random.default_rng(SEED)
    prompt = rng.integers(0, VOCAB, size=(1, PROMPT)).astype(np.int64)
    prefill_out = export("gpt2_kv_prefill", Prefill(model), [prompt], args.out,
                         f"tiny random GPT-2 ({LAYERS} layers, {HEADS} heads, width {WIDTH}), first step from "
                         "Hugging Face's empty DynamicCache: logits + keys/values per layer")
    next_token = rng.integers(0, VOCAB, size=(1, 1)).astype(np.int64)
    export("gpt2_kv_decode", Decode(model), [next_token, *prefill_out[1:]], args.out,
           "the same GPT-2, one decoding step: a new token + gpt2_kv_prefill's cache -> logits + the longer cache")
    for name in ("gpt2_kv_prefill", "gpt2_kv_decode"):
        size = sum(p.stat().st_size for p in (args.out / name).iterdir())
        print(f"{name}: {size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
