"""Constant weights laid out for NumPy's BLAS, for the small products a model leaves there.

nn.Linear and nn.MultiheadAttention keep W^T as a transposed view of the (out, in) weight, which
costs nothing at load.  OpenBLAS multiplies by such a view more slowly than by a row-major matrix
of the same values, most of all on the small products that stay on BLAS (under oneDNN's
``PRODUCT_WORK``).  One thread, Intel Xeon (SkylakeX kernels), row-major against the view:
(20, 64) @ (64, 128) 5.2 against 13.2 us, (20, 64) @ (64, 192) 6.8 against 18.3, (197, 192) @
(192, 576) 475 against 537 (docs/performance.md, "Small products on BLAS").

So the first time a weight's product runs on BLAS, it gets a row-major copy, if it is small.  The
copy sits beside the original (the model's IR and oneDNN's product still hold that), so only a
weight of at most ``ROW_MAJOR_BYTES`` is copied, and only once it is used here: a transformer whose
products all run on oneDNN copies nothing.
"""

from __future__ import annotations

import numpy as np

ROW_MAJOR_BYTES = 1 << 20


def row_major(backend, weight_t: np.ndarray) -> np.ndarray:
    """``weight_t`` as a row-major array on a 64-byte boundary (``backend.aligned``, as BLAS wants its
    operands) when it is small enough to copy, else as it is."""
    if weight_t.flags.c_contiguous or weight_t.nbytes > ROW_MAJOR_BYTES:
        return weight_t
    return backend.aligned(weight_t)
