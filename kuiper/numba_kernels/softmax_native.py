"""Softmax over the last axis on oneDNN (kuiper.onednn.Softmax): the NumPy backend's ``softmax_in_place``.

Float32 C-contiguous tensors of at least ``NATIVE_ELEMENTS`` run on oneDNN's vectorised kernel
at the model's thread count; smaller ones, other dtypes and other axes keep the compiled row
loop (norm.py) or the backend's own.  On CaiT's and Swin's attention scores the row loop, one
thread below 2^22 element operations, took 2.5-3.2 ns an element; oneDNN 1.1 at one thread
and 0.7 at two (docs/performance.md).  Below a few thousand elements entering oneDNN costs
more than the loop.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import onednn
from ..thread_limits import requested as model_threads
from .norm import softmax_in_place as compiled_softmax_in_place

NATIVE_ELEMENTS = 8192


def softmax_in_place(default, x, axis: int):
    """The ``softmax_in_place`` primitive of NumPy-array backends (``kuiper_add_primitives``)."""
    if axis in (-1, x.ndim - 1) and _on_onednn(x):
        return x
    return compiled_softmax_in_place(default, x, axis)


def _on_onednn(x) -> bool:
    """Softmax over x's last axis in place on oneDNN; False where it does not take x (nothing written)."""
    library = onednn.library()
    if (library is None or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.size < NATIVE_ELEMENTS
            or not x.flags.c_contiguous or not x.flags.writeable):
        return False
    rows = x.reshape(-1, x.shape[-1])
    # oneDNN leaves a row holding NaN or +inf partly finite, where PyTorch makes the whole row NaN (a row
    # of -inf comes out NaN from both): such rows go to the row loop.  One comparison finds them, at half
    # the cost of summing the output afterwards (CaiT's (784, 196) scores: 19 against 40 us).
    if not (rows < np.inf).all():
        return False
    softmax = _softmax(library)
    try:
        step = softmax.plan(rows.shape, model_threads())
    except onednn.OneDnnError:
        return False  # a shape oneDNN refused: the row loop takes it
    step(rows)
    return True


@functools.cache
def _softmax(library) -> onednn.Softmax:
    """One oneDNN softmax per library: its primitives are kept by shape and thread count."""
    return onednn.Softmax(library)
