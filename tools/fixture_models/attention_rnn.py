"""Attention, recurrent layers and the ops real transformer/timm graphs add (issue 12).

Small widths throughout.  Every fixture is checked at two sizes of dim 0: for the
batch_first models that is the batch, for the sequence-first ones (``*_seq_first``) it
is the sequence length, so both the batch and the sequence length vary.

What pnnx writes (checked on the exported .pnnx.param):
* nn.MultiheadAttention keeps its module form.  A float attn_mask that is a graph input
  comes after query/key/value; a mask that is a constant or computed in the graph comes
  *first*, while $attn_mask still marks the last position, and pnnx's own Python then
  passes the wrong tensors (a pnnx bug): those fixtures skip the pnnx-Python self-check
  (``pnnx_py_check=False``) and kuiper reads the order by shape.
* nn.TransformerEncoderLayer: the fused fast path (aten::_transformer_encoder_layer_fwd)
  is switched off while building, so the trace is made of ordinary ops.
* F.scaled_dot_product_attention keeps its F.* form with $query/$key/$value/$attn_mask.
* nn.LSTM/GRU/RNN keep their module form with every output the code uses.
* torch.addcmul becomes ``aten::addcmul`` with a pnnx.Expression for ``value``.
* F.rms_norm becomes nn.RMSNorm; torch.arange of a graph size stays torch.arange.
"""

import torch
import torch.nn.functional as F
from fixturelib import ModelSpec
from torch import nn


def _randomize(module: nn.Module) -> nn.Module:
    """Non-trivial norm affine params (the defaults, ones and zeros, hide a missing weight)."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                param.uniform_(0.5, 1.5)
            elif "norm" in name and name.endswith("bias"):
                param.normal_(0.0, 0.5)
    return module


# ---------------------------------------------------------------- attention


class MHAVariants(nn.Module):
    """Self-attention with a float mask and averaged weights; cross-attention with kdim/vdim,
    no bias, add_bias_kv, add_zero_attn and per-head weights."""

    def __init__(self):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(16, 2, kdim=8, vdim=12, bias=False, add_bias_kv=True,
                                                add_zero_attn=True, batch_first=True)
        self.mask = nn.Parameter(torch.randn(5, 5))

    def forward(self, x, key, value):
        y, weights = self.self_attn(x, x, x, attn_mask=self.mask)
        z, _ = self.cross_attn(y, key, value)
        return y, weights, z


class MHASeqFirst(nn.Module):
    """batch_first=False: dim 0 is the sequence; a 3-D (N * heads, L, L) mask is not
    batch-free, so this one uses a 2-D float mask built from the sequence length."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(12, 3)

    def forward(self, x):
        length = x.size(0)
        positions = torch.arange(length, dtype=torch.float32)
        mask = -0.1 * (positions[None, :] - positions[:, None]).abs()  # distance penalty
        out, weights = self.attn(x, x, x, attn_mask=mask)
        return out, weights


class SDPAVariants(nn.Module):
    """F.scaled_dot_product_attention: plain, float mask with scale, causal, bool mask, 3-D inputs."""

    def __init__(self):
        super().__init__()
        self.float_mask = nn.Parameter(torch.randn(6, 7))
        self.register_buffer("bool_mask", torch.rand(6, 7) > 0.3)

    def forward(self, q, k, v):
        a = F.scaled_dot_product_attention(q, k, v)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=self.float_mask, scale=0.3)
        c = F.scaled_dot_product_attention(q, k[:, :, :6], v[:, :, :6], is_causal=True)
        d = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bool_mask)
        e = F.scaled_dot_product_attention(q.flatten(1, 2), k.flatten(1, 2), v.flatten(1, 2))
        return a, b, c, d, e


class EncoderStack(nn.Module):
    """Two nn.TransformerEncoderLayer (pre- and post-norm, GELU and ReLU)."""

    def __init__(self, batch_first: bool):
        super().__init__()
        torch.backends.mha.set_fastpath_enabled(False)  # see the module docstring
        self.post_norm = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=batch_first)
        self.pre_norm = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, activation="gelu",
                                                   batch_first=batch_first, norm_first=True)

    def forward(self, x):
        return self.pre_norm(self.post_norm(x))


def window_partition(x, window: int):
    b, h, w, c = x.shape
    x = x.view(b, h // window, window, w // window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, window * window, c)


def window_merge(windows, window: int, b: int, h: int, w: int):
    c = windows.shape[-1]
    x = windows.view(b, h // window, w // window, window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h, w, c)


class SwinBlock(nn.Module):
    """A Swin-style block: LayerNorm, cyclic shift, window attention (nn.MultiheadAttention)
    with the shifted-window mask, reverse shift, MLP.  The mask is a constant
    (windows, L, L) float tensor repeated per image and head to (B * windows * heads, L, L)."""

    def __init__(self, size: int = 8, window: int = 4, shift: int = 2, dim: int = 16, heads: int = 2):
        super().__init__()
        self.size, self.window, self.shift, self.heads = size, window, shift, heads
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        # Swin's mask: tokens from different regions of the shifted image may not attend to each other.
        regions = torch.zeros(1, size, size, 1)
        count = 0
        for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                regions[:, hs, ws, :] = count
                count += 1
        ids = window_partition(regions, window).squeeze(-1)  # (windows, L)
        mask = (ids[:, None, :] != ids[:, :, None]).float() * -100.0
        self.register_buffer("mask", mask)

    def forward(self, x):  # (B, H, W, C)
        b, h, w, _ = x.shape
        shortcut = x
        x = torch.roll(self.norm1(x), shifts=(-self.shift, -self.shift), dims=(1, 2))
        windows = window_partition(x, self.window)
        mask = self.mask.repeat_interleave(self.heads, dim=0).repeat(b, 1, 1)
        attended, _ = self.attn(windows, windows, windows, attn_mask=mask, need_weights=False)
        x = torch.roll(window_merge(attended, self.window, b, h, w), shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x
        return x + self.mlp(self.norm2(x))


# ---------------------------------------------------------------- recurrent


class RecurrentStack(nn.Module):
    """LSTM (2 layers, bidirectional, proj_size), GRU with a given h0, ReLU RNN; batch first."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True, proj_size=5)
        self.gru = nn.GRU(10, 7, num_layers=2, batch_first=True)
        self.rnn = nn.RNN(7, 4, nonlinearity="relu", batch_first=True, bias=False)

    def forward(self, x, h0):
        y, (h_n, c_n) = self.lstm(x)
        z, g_n = self.gru(y, h0.transpose(0, 1).contiguous())
        w, r_n = self.rnn(z)
        return y, h_n, c_n, z, g_n, w, r_n


class RecurrentSeqFirst(nn.Module):
    """Sequence first (dim 0 is time): bidirectional GRU, then an LSTM with h0/c0 from a Linear."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 6, bidirectional=True)
        self.init = nn.Linear(5, 2 * 4)
        self.lstm = nn.LSTM(12, 4)

    def forward(self, x):
        y, _ = self.gru(x)
        h0, c0 = self.init(x[0]).unsqueeze(0).chunk(2, dim=-1)
        z, (h_n, c_n) = self.lstm(y, (h0.contiguous(), c0.contiguous()))
        return z, h_n, c_n


# ---------------------------------------------------------------- other ops


class NewOps(nn.Module):
    """addcmul, RMSNorm (module and functional), LRN (module and functional), torch.arange."""

    def __init__(self):
        super().__init__()
        self.rms = nn.RMSNorm([4, 5])
        self.rms_eps = nn.RMSNorm(5, eps=1e-3, elementwise_affine=False)
        self.lrn = nn.LocalResponseNorm(3, alpha=0.1, beta=0.7, k=1.5)
        self.gain = nn.Parameter(torch.rand(5) + 0.5)
        with torch.no_grad():
            self.rms.weight.uniform_(0.5, 1.5)

    def forward(self, x, y):
        a = torch.addcmul(x, y, x, value=0.5)
        b = self.rms(x) + F.rms_norm(y, [5], self.gain, 1e-4) + self.rms_eps(x)
        c = self.lrn(x) + F.local_response_norm(y, 2)
        positions = torch.arange(x.size(0), dtype=torch.float32)  # a graph size: kept as torch.arange
        d = x * positions.view(-1, 1, 1, 1)
        return a, b, c, d


class Pool3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.avg = nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=False)
        self.adaptive_max = nn.AdaptiveMaxPool3d((2, 3, 2))
        self.adaptive_avg = nn.AdaptiveAvgPool3d((3, 2, 2))
        self.max = nn.MaxPool3d((2, 3, 2), stride=2, ceil_mode=True)

    def forward(self, x):
        return (self.avg(x), F.avg_pool3d(x, (1, 2, 2), ceil_mode=True, divisor_override=3),
                self.adaptive_max(x), self.adaptive_avg(x), self.max(x))


class GatedMLPs(nn.Module):
    """Gated linear units as transformer MLPs write them: one Linear to twice the width, torch.chunk
    into halves, an activation of one half times the other (SwiGLU as EVA-02 and LLaMA do it, GeGLU
    with the factors swapped, a sigmoid gate on the second half, tanh, which has no oneDNN post-op)."""

    def __init__(self):
        super().__init__()
        self.swiglu_in, self.swiglu_out = nn.Linear(16, 48), nn.Linear(24, 16)
        self.geglu_in = nn.Linear(16, 32)
        self.sigmoid_in = nn.Linear(16, 40)
        self.tanh_in = nn.Linear(16, 24)
        self.act = nn.SiLU()

    def forward(self, x):
        a, b = self.swiglu_in(x).chunk(2, dim=-1)
        swiglu = self.swiglu_out(self.act(a) * b)
        c, d = self.geglu_in(x).chunk(2, dim=-1)
        geglu = d * F.gelu(c)
        e, f = self.sigmoid_in(x).chunk(2, dim=-1)
        g, h = self.tanh_in(x).chunk(2, dim=-1)
        return swiglu, geglu, e * torch.sigmoid(f), torch.tanh(g) * h


MODELS = {
    "attention_mha": ModelSpec(lambda: MHAVariants(), ((2, 5, 16), (2, 7, 8), (2, 7, 12)),
                               "nn.MultiheadAttention: constant float mask (mask-first order) + weights; kdim/vdim, "
                               "no bias, bias_kv, zero_attn", pnnx_py_check=False),
    "attention_mha_seq_first": ModelSpec(lambda: MHASeqFirst(), ((5, 2, 12),),
                                         "nn.MultiheadAttention batch_first=False, mask from torch.arange of the length",
                                         extra_batches=(8,), dynamic_batch=7, pnnx_py_check=False),
    "attention_sdpa": ModelSpec(lambda: SDPAVariants(), ((2, 3, 6, 8), (2, 3, 7, 8), (2, 3, 7, 5)),
                                "F.scaled_dot_product_attention: masks, scale, causal, 3-D"),
    "transformer_encoder": ModelSpec(lambda: _randomize(EncoderStack(batch_first=True)), ((2, 6, 16),),
                                     "two nn.TransformerEncoderLayer (post/pre norm), batch first"),
    "transformer_encoder_seq_first": ModelSpec(lambda: _randomize(EncoderStack(batch_first=False)), ((6, 2, 16),),
                                               "two nn.TransformerEncoderLayer, sequence first",
                                               extra_batches=(9,), dynamic_batch=4),
    "swin_block_shifted": ModelSpec(lambda: _randomize(SwinBlock()), ((1, 8, 8, 16),),
                                    "Swin-style block: cyclic shift, window MHA with the shifted-window mask",
                                    extra_batches=(2,), dynamic_batch=2, pnnx_py_check=False),
    "recurrent_stack": ModelSpec(lambda: RecurrentStack(), ((2, 5, 6), (2, 2, 7)),
                                 "LSTM 2-layer bidir proj_size, GRU 2-layer with h0, ReLU RNN without bias"),
    "recurrent_seq_first": ModelSpec(lambda: RecurrentSeqFirst(), ((5, 2, 5),),
                                     "bidirectional GRU then LSTM with h0/c0, sequence first",
                                     extra_batches=(8,), dynamic_batch=3),
    "new_ops_norm_addcmul_arange": ModelSpec(lambda: NewOps(), ((2, 3, 4, 5), (2, 3, 4, 5)),
                                             "aten::addcmul (pnnx's Python cannot spell it), nn.RMSNorm/F.rms_norm, "
                                             "LRN, torch.arange", dynamic_batch=3, pnnx_py_check=False),
    "mlp_gated": ModelSpec(lambda: GatedMLPs(), ((2, 7, 16),),
                           "gated MLPs: Linear, torch.chunk(2, dim=-1), SiLU/GELU/sigmoid/tanh of one half times "
                           "the other", dynamic_batch=3),
    "pool3d": ModelSpec(lambda: Pool3d(), ((1, 2, 4, 5, 6),), "AvgPool3d/F.avg_pool3d, AdaptiveMax/AvgPool3d, "
                        "MaxPool3d ceil_mode"),
}
