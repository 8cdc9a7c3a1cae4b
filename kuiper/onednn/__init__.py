"""oneDNN, the library under PyTorch's CPU convolutions, called through ctypes.

Installed with kuiper on Linux x86-64 (the ``onednn-cpu-gomp`` wheel): when it is found, the
compiled CPU kernels (kuiper.numba_kernels) run float32 convolutions, pooling, Linear layers,
attention and layer norms with it; without it (another platform, no libgomp, ``KUIPER_ONEDNN=0``)
they keep their own algorithms.

Nothing here knows an op's params: ``Convolution``, ``MatMul``, ``Product`` and the rest take arrays and numbers.
"""

from __future__ import annotations

from .attention import Attention
from .blocked import Blocked
from .concat import Concatenation
from .conv import Convolution
from .layer_norm import LayerNormalization
from .matmul import MatMul
from .pool import Pooling
from .product import Product
from .sequence import Sequence, SequenceBuilder, arena_bytes, release_arena
from .softmax import Softmax
from .binding import OneDnnError, loaded

__all__ = ["Attention", "Blocked", "Concatenation", "Convolution", "LayerNormalization", "MatMul", "OneDnnError",
           "Pooling", "Product", "Sequence", "SequenceBuilder", "Softmax", "arena_bytes", "available", "describe",
           "library", "on_gnu_openmp", "release_arena"]


def library():
    """The loaded library, or None (``describe()`` says why)."""
    return loaded()[0]


def available() -> bool:
    return library() is not None


def on_gnu_openmp() -> bool:
    """Whether oneDNN is found and threads with GNU OpenMP (libgomp), as numba's OpenMP layer does on Linux:
    the two then share one pool of threads."""
    found = library()
    return found is not None and found.openmp_name == "libgomp.so.1"


def describe() -> str:
    """One line for ``kuiper info``."""
    found, text = loaded()
    return f"oneDNN kernels: {'on' if found is not None else 'off'} ({text})"
