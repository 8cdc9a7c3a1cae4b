"""The issue-12 fixtures (tools/fixture_models/attention_rnn.py): what their graphs must
contain, so a regenerated fixture cannot silently lose coverage, and how their inputs vary.

tests/end_to_end/test_models.py already compares every fixture with PyTorch at each saved size of
dim 0, fused and unfused; for the *_seq_first fixtures dim 0 is the sequence length.
"""

from __future__ import annotations

from collections import Counter

import pytest

from kuiper.formats.pnnx import load_pnnx

from conftest import MODELS, pnnx_file_ops, reference_batches

EXPECTED_OP_TYPES = {
    "attention_mha": {"nn.MultiheadAttention": 2},
    "attention_mha_seq_first": {"nn.MultiheadAttention": 1, "torch.arange": 1},
    "attention_sdpa": {"F.scaled_dot_product_attention": 5},
    "transformer_encoder": {"nn.MultiheadAttention": 2, "nn.LayerNorm": 4, "nn.Linear": 4},
    "transformer_encoder_seq_first": {"nn.MultiheadAttention": 2, "nn.LayerNorm": 4},
    "swin_block_shifted": {"nn.MultiheadAttention": 1, "torch.roll": 2, "Tensor.repeat": 1},
    "recurrent_stack": {"nn.LSTM": 1, "nn.GRU": 1, "nn.RNN": 1},
    "recurrent_seq_first": {"nn.LSTM": 1, "nn.GRU": 1},
    "new_ops_norm_addcmul_arange": {"aten::addcmul": 1, "nn.RMSNorm": 3, "nn.LocalResponseNorm": 1,
                                    "F.local_response_norm": 1, "torch.arange": 1},
    "pool3d": {"nn.AvgPool3d": 1, "F.avg_pool3d": 1, "nn.AdaptiveMaxPool3d": 1, "nn.AdaptiveAvgPool3d": 1,
               "nn.MaxPool3d": 1},
}


def ops_of(name):
    """The ops as the file spells them."""
    return pnnx_file_ops(MODELS / name / "model.pnnx.param")


def loaded_ops(name):
    """The ops as the PNNX frontend hands them on: canonical types, weights read."""
    return load_pnnx(MODELS / name / "model.pnnx.param").ops


@pytest.mark.parametrize("name", sorted(EXPECTED_OP_TYPES))
def test_fixture_graph_contains_the_op_types_it_is_meant_to_cover(name):
    counts = Counter(op.type for op in ops_of(name))
    missing = {t: n for t, n in EXPECTED_OP_TYPES[name].items() if counts[t] < n}
    assert not missing, f"{name}: expected at least {missing}, pnnx emitted {dict(counts)}"


@pytest.mark.parametrize("name", sorted(EXPECTED_OP_TYPES))
def test_fixture_has_references_at_two_sizes_of_dim0(name):
    sizes = {data["inputs"][0].shape[0] for data in reference_batches(name).values()}
    assert len(sizes) >= 2


def test_mask_orders_pnnx_writes_are_both_covered():
    """attention_mha has the mask first (a constant mask), swin_block_shifted after the query."""
    (first,) = [op for op in ops_of("attention_mha") if op.name == "self_attn"]
    assert first.input_keys[-1] == "attn_mask" and first.inputs[0] != first.inputs[-1]
    (swin,) = [op for op in ops_of("swin_block_shifted") if op.type == "nn.MultiheadAttention"]
    assert swin.input_keys == [None, "attn_mask"]


def test_cross_attention_fixture_uses_kdim_vdim_bias_kv_and_zero_attn():
    (cross,) = [op for op in loaded_ops("attention_mha") if op.name == "cross_attn"]
    assert cross.params["kdim"] == 8 and cross.params["vdim"] == 12
    assert cross.params["add_bias_kv"] is True and cross.params["add_zero_attn"] is True
    assert "k_proj_weight" in cross.attrs and "bias_k" in cross.attrs


def test_lstm_fixture_has_projection_and_both_directions():
    (lstm,) = [op for op in loaded_ops("recurrent_stack") if op.type == "Recurrent" and op.params["cell"] == "LSTM"]
    assert lstm.params["proj_size"] == 5 and lstm.params["bidirectional"] is True
    assert "weight_hr_l1_reverse" in lstm.attrs and len(lstm.outputs) == 3
