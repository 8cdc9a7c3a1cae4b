"""F.scaled_dot_product_attention and nn.MultiheadAttention with their core on oneDNN (kuiper.onednn.Attention).

The two products and the softmax run on oneDNN's OpenMP threads at the model's thread count,
reading the heads where they lie; the ops' own code still reads the inputs and builds the masks.
MultiheadAttention's projections run on oneDNN's matmul (``onednn.MatMul``) too: with any op on
oneDNN in the model, NumPy's BLAS has one thread.  Operands oneDNN does not take as they are (another
dtype, broadcast batch dims, zero strides), and products too small to win back a oneDNN call
(``PRODUCT_WORK``), keep the reference's ``attend``; except that MultiheadAttention's heads, at
a few dozen tokens (``HEADS_WORK``), run in one compiled loop (``attention_kernels.attend_heads``)
when its weights are not asked for.
"""

from __future__ import annotations

import math

import numpy as np

from ..output_buffers import output_array
from .. import onednn
from ..limits import check_size
from ..onednn.attention import fits
from ..onednn.primitives import PRODUCT_WORK, product_on_onednn
from ..ops import attention as reference
from ..ops.special_values import is_tame
from ..ops.specialize import same_shapes
from ..thread_limits import requested as model_threads
from .blas_weights import row_major
from .runtime import KernelModule

kernels = KernelModule("attention_kernels")
NO_MASK = np.zeros((1, 1, 1, 1), np.float32)  # what the compiled heads read when no mask is added
# Multiply-adds of both products over every head under which the compiled heads beat NumPy's split,
# batched products and merge (timeit, one thread: 10 tokens of 64, 4 heads, 12.8 K: 12 against 23 us;
# 20 tokens, 51 K: 25 against 28; 30 tokens, 115 K: 66 against 58; 64 tokens of 128, 1 M: 274 against 140).
HEADS_WORK = 64 * 1024


class OneDnnAttention:
    """The oneDNN path of an attention op (mixed in before the op class)."""

    native = None  # the oneDNN attention, when the library is there

    def setup(self):
        super().setup()
        library = onednn.library()
        if library is not None:
            self.native = onednn.Attention(library)
            self.kernel_note = "products and softmax on oneDNN (the reference under 1 M multiply-adds)"

    def attention(self, q, k, v, scale: float, masks=(), keep_weights: bool = False):
        if (self.native is not None and _work(q, k, v) >= PRODUCT_WORK and fits(q, k, v)  # cheap tests first
                and _tame(q, k, v)):
            # The (..., L, S) scores are the one buffer sized by the inputs' product, checked first.
            check_size(q.shape[:-1] + (k.shape[-2],), 4, self.node.describe())
            try:
                return self.native(q, k, v, scale, masks, model_threads(), keep_weights)
            except onednn.OneDnnError:
                pass  # a shape oneDNN refused: the reference computes it
        return super().attention(q, k, v, scale, masks, keep_weights)


def _work(q, k, v) -> int:
    """Multiply-adds of the two products: each (L, S) score takes E, each output S times Ev."""
    return math.prod(q.shape[:-1]) * k.shape[-2] * (q.shape[-1] + v.shape[-1])


def _tame(q, k, v) -> bool:
    """Whether q, k and v hold only finite values of moderate size; others take the reference's
    ``attend_exactly``, where a masked-out NaN or inf token leaves the rows that may not see it clean."""
    return is_tame(np, q) and is_tame(np, k) and is_tame(np, v)


def _all_float32_arrays(*values) -> bool:
    """Whether every value is a float32 ndarray (a loop: a generator in all() cost 1.5 us a call)."""
    for value in values:
        if not isinstance(value, np.ndarray) or value.dtype != np.float32:
            return False
    return True


class NativeScaledDotProductAttention(OneDnnAttention, reference.ScaledDotProductAttention):
    """F.scaled_dot_product_attention."""


class NativeMultiheadAttention(OneDnnAttention, reference.MultiheadAttention):
    """nn.MultiheadAttention; its input and output projections run on oneDNN's matmul as well."""

    def setup(self):
        super().setup()
        self._products: dict[str, onednn.MatMul] = {}  # by projection name, made on first use
        self._blas_weights: dict[str, np.ndarray] = {}  # by projection name, as NumPy's BLAS takes them best
        self._handed_over = False  # whether the packed and output projections' weights are oneDNN's now
        weights = [self.out_proj_t, self.q_proj_t, self.k_proj_t, self.v_proj_t]
        biases = [bias for bias in (self.in_bias, self.out_bias) if bias is not None]
        self._float32_weights = all(array.dtype == np.float32 for array in weights + biases)
        # Each projection's (in, out) sizes, known without reading its weight.
        self._projection_shapes = {name: tuple(self.projection_weight(name).shape) for name in ("q", "k", "v", "out")}
        if self.packed_projection:
            self._projection_shapes["qkv"] = tuple(self.in_proj_t.shape)

    def hand_over_weights(self) -> dict:
        """The packed input projection's weight and the output projection's, to oneDNN's products
        (``onednn.WeightLayouts``), which drop the given arrays once they have packed them: ViT-B/16's 113 MB.
        The op reads them from there from then on (NumPy's BLAS, for products of few rows: remade once and
        kept; q, k and v, for attention across two inputs: slices of the packed one's)."""
        if self.native is None or not self.packed_projection or not self._float32_weights:
            return {}
        handed = {}
        for name, key in (("qkv", "in_proj_weight"), ("out", "out_proj.weight")):
            layouts = self.cached(self._products, name, self._product, name).weight_layouts
            layouts.let_go_when_kept = True
            handed[key] = lambda layouts=layouts: layouts.given[1]
        self.in_proj_t = self.q_proj_t = self.k_proj_t = self.v_proj_t = self.out_proj_t = None
        self._handed_over = True
        return handed

    def projection_weight(self, name: str):
        """``MultiheadAttention.projection_weight``; once handed over, as oneDNN's product gives it back (q, k
        and v: slices of the packed one)."""
        if not self._handed_over:
            return super().projection_weight(name)
        if name in ("qkv", "out"):
            return self._products[name].weight_layouts.given[1].T
        i, e = "qkv".index(name), self.embed_dim
        return self._products["qkv"].weight_layouts.given[1].T[:, i * e:(i + 1) * e]

    def _product(self, name: str) -> onednn.MatMul:
        return onednn.MatMul(self.native.library, self.projection_weight(name).T, self.projection_bias(name))

    def multi_head(self, q, k, v, masks):
        """The heads in one compiled loop, for float32 products under ``HEADS_WORK`` without the weights."""
        batch, length, width = q.shape
        work = batch * length * k.shape[1] * (width + v.shape[2])
        if (self.need_weights or work >= HEADS_WORK or not _all_float32_arrays(q, k, v, *masks)
                or not _tame(q, k, v)):
            return super().multi_head(q, k, v, masks)
        mask = None
        for addend in masks:  # (L, S), (N, heads, L, S) or (N, 1, 1, S): one 4-D sum
            addend = np.reshape(addend, (1,) * (4 - addend.ndim) + addend.shape)
            mask = addend if mask is None else mask + addend
        out = output_array((batch, length, v.shape[2]), np.float32)
        kernels.attend_heads(work, q, k, v, NO_MASK if mask is None else np.ascontiguousarray(mask), mask is not None,
                             np.float32(self.scale), self.num_heads, out)
        return out, None

    def specialized(self, inputs):
        """Attention without masks or weights asked, small enough for the compiled heads: the projections,
        their tameness checks, the heads and the output projection called directly while the inputs keep
        their class, dtype and shape (a 20-token, 4-head self-attention of 64: forward spends ~12 us
        deciding again what the first call decided).  Computes what ``forward`` computes: self-attention's
        qkv rows are tame when their whole sum of squares is, which implies each third's; projections that
        are not go to ``forward``, which decides again for NaN and infinities."""
        if (len(inputs) != self.tensor_count or self.need_weights or self.bias_k is not None or self.add_zero_attn
                or self.mask_keys or not self._fits(inputs)):
            return None
        if not all(isinstance(value, np.ndarray) and value.dtype == np.float32 and value.ndim == 3
                   for value in inputs):
            return None
        query, key, value = self._spread(inputs)
        length, source = (query.shape[1], key.shape[1]) if self.batch_first else (query.shape[0], key.shape[0])
        batch = query.shape[0] if self.batch_first else query.shape[1]
        width = self.embed_dim
        work = batch * length * source * 2 * width
        if work >= HEADS_WORK or not self._float32_weights:
            return None
        forward, project, batch_first, heads = self.forward, self.project, self.batch_first, self.num_heads
        spread, in_project, packed = self._spread, self._project, self.packed_projection
        scale = np.float32(self.scale)

        def attend(q, k, v):
            heads_out = np.empty((batch, length, width), np.float32)
            kernels.attend_heads(work, q, k, v, NO_MASK, False, scale, heads, heads_out)
            out = project("out", heads_out)
            return out if batch_first else np.permute_dims(out, (1, 0, 2))

        if len(inputs) == 1 and packed:
            def direct(x):  # one (E, 3E) product, as forward makes for self-attention
                qkv = project("qkv", x if batch_first else np.permute_dims(x, (1, 0, 2)))
                if not is_tame(np, qkv):
                    return forward(x)
                return attend(qkv[..., :width], qkv[..., width:2 * width], qkv[..., 2 * width:])
        else:
            def direct(*xs):
                tensors = spread(xs)
                if not batch_first:
                    tensors = [np.permute_dims(t, (1, 0, 2)) for t in tensors]
                q, k, v = in_project(*tensors, tensors[0] is tensors[1] is tensors[2])
                if not _tame(q, k, v):
                    return forward(*xs)
                return attend(q, k, v)

        return same_shapes(inputs, direct, forward)

    def project(self, name: str, x):
        inputs, outputs = self._projection_shapes[name]
        if (self.native is not None and isinstance(x, np.ndarray) and x.dtype == np.float32 and self._float32_weights
                and product_on_onednn(math.prod(x.shape[:-1]), inputs, outputs)):
            product = self.cached(self._products, name, self._product, name)
            rows = np.reshape(x, (-1, inputs))
            try:
                return np.reshape(product(rows, model_threads()), x.shape[:-1] + (outputs,))
            except onednn.OneDnnError:
                pass  # a shape oneDNN refused: NumPy computes it
        if isinstance(x, np.ndarray) and x.dtype == np.float32 and self._float32_weights:
            laid_out = self.cached(self._blas_weights, name, self._blas_weight, name)
            bias = self.projection_bias(name)
            # NumPy's BLAS, into an array of the memory plan's (kuiper/output_buffers.py).
            out = np.matmul(x, laid_out, out=output_array(x.shape[:-1] + laid_out.shape[1:], np.float32))
            if bias is not None:
                out += bias
            return out
        return super().project(name, x)

    def _blas_weight(self, name: str) -> np.ndarray:
        return row_major(self.backend, self.projection_weight(name))


KERNELS = [NativeScaledDotProductAttention, NativeMultiheadAttention]
