"""F.scaled_dot_product_attention and nn.MultiheadAttention with their core on oneDNN (kuiper.onednn.Attention).

The two products and the softmax run on oneDNN's OpenMP threads at the model's thread count,
reading the heads where they lie; the ops' own code still reads the inputs, builds the masks
and, for MultiheadAttention, projects.  Operands oneDNN does not take as they are (another
dtype, broadcast batch dims, zero strides), and products too small to win back a oneDNN call
(``PRODUCT_WORK``), keep the reference's ``attend``.
"""

from __future__ import annotations

import math

from .. import onednn
from ..limits import check_size
from ..onednn.attention import fits
from ..onednn.primitives import PRODUCT_WORK
from ..ops import attention as reference
from ..thread_limits import requested as model_threads


class OneDnnAttention:
    """The oneDNN path of an attention op (mixed in before the op class)."""

    native = None  # the oneDNN attention, when the library is there

    def setup(self):
        super().setup()
        library = onednn.library()
        if library is not None:
            self.native = onednn.Attention(library)
            self.owns_thread_pool = True
            self.kernel_note = "products and softmax on oneDNN (the reference under 1 M multiply-adds)"

    def attention(self, q, k, v, scale: float, masks=(), keep_weights: bool = False):
        if self.native is not None and fits(q, k, v) and _work(q, k, v) >= PRODUCT_WORK:
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


class NativeScaledDotProductAttention(OneDnnAttention, reference.ScaledDotProductAttention):
    """F.scaled_dot_product_attention."""


class NativeMultiheadAttention(OneDnnAttention, reference.MultiheadAttention):
    """nn.MultiheadAttention."""


KERNELS = [NativeScaledDotProductAttention, NativeMultiheadAttention]
