"""A Hugging Face GPT-2 with a KV cache (tiny, random weights) runs and matches PyTorch.

The fixtures come from tools/make_kv_cache_fixtures.py: ``gpt2_kv_prefill`` starts from
Hugging Face's empty DynamicCache (a ``torch.cat`` onto a 1-D tensor of shape (0,)), and
``gpt2_kv_decode`` takes one token and the prefill's cache.  References are eager PyTorch
float32 outputs; the tolerance is test_models.py's (1e-4 absolute, every output here is
below 10 in magnitude).
"""

from __future__ import annotations

import numpy as np

import kuiper

from conftest import MODELS, reference_batches

TOLERANCE = 1e-4


def load(name: str, **options) -> kuiper.Model:
    return kuiper.load(MODELS / name / "model.pnnx.param", **options)


def assert_matches(got, want, where: str) -> None:
    got = kuiper.to_numpy(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != PyTorch {want.shape}"
    assert float(np.abs(want).max()) <= 10, f"{where}: outputs outgrew the absolute tolerance"
    error = float(np.abs(got.astype(np.float64) - want).max())
    assert error <= TOLERANCE, f"{where}: max abs error {error:.3g} > {TOLERANCE}"


def test_the_prefill_graph_joins_keys_onto_an_empty_1d_cache():
    model = load("gpt2_kv_prefill", fuse=False)
    shapes = model.ir.operands
    cats = [step.node for step in model.steps if step.node.type == "Concat"]
    assert cats and all(shapes[node.inputs[0]].shape == (0,) for node in cats)


def test_prefill_matches_pytorch(backend_name):
    model = load("gpt2_kv_prefill", backend=backend_name)
    data = reference_batches("gpt2_kv_prefill")["b1"]
    outputs = model(*data["inputs"])
    assert len(outputs) == len(data["outputs"]) == 5  # logits, then keys and values of 2 layers
    for index, (got, want) in enumerate(zip(outputs, data["outputs"])):
        assert_matches(got, want, f"prefill output {index}")


def test_decoding_from_kuipers_own_cache_matches_pytorch(backend_name):
    prefill = load("gpt2_kv_prefill", backend=backend_name)
    decode = load("gpt2_kv_decode", backend=backend_name)
    prompt = reference_batches("gpt2_kv_prefill")["b1"]["inputs"][0]
    step = reference_batches("gpt2_kv_decode")["b1"]
    next_token = step["inputs"][0]
    _, *cache = prefill(prompt, to_numpy=True)
    logits, *longer_cache = decode(next_token, *cache, to_numpy=True)
    assert_matches(logits, step["outputs"][0], "decode logits")
    for index, (got, want) in enumerate(zip(longer_cache, step["outputs"][1:])):
        assert got.shape[2] == prompt.shape[1] + 1  # one position longer than the prompt
        assert_matches(got, want, f"decode cache {index}")
    assert int(np.argmax(logits[0, -1])) == int(np.argmax(step["outputs"][0][0, -1]))  # the same next token
