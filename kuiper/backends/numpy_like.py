"""Shared primitives for backends whose native module follows NumPy's API (NumPy, CuPy)."""

from __future__ import annotations

from typing import Sequence

from .base import Backend

# Padding-mode names as PyTorch spells them -> NumPy's np.pad names.
_PAD_MODES = {"constant": "constant", "zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}

class NumPyLikeBackend(Backend):
    """``native`` is the numpy or cupy module; ``xp`` its array-API wrapper."""

    native = None

    def is_array(self, value) -> bool:
        return isinstance(value, self.native.ndarray)

    def pad(self, x, pads: Sequence[tuple[int, int]], mode: str = "constant", value: float = 0.0):
        if not any(before or after for before, after in pads):
            return x
        np_mode = _PAD_MODES[mode]
        if np_mode == "constant":
            return self.native.pad(x, pads, mode="constant", constant_values=value)
        return self.native.pad(x, pads, mode=np_mode)

    def sliding_window(self, x, window: Sequence[int], axes: Sequence[int]):
        if x.dtype.isbuiltin == 2:  # ml_dtypes' float8 ...: as_strided cannot describe them, so slide their bits
            bits = x.view(f"u{x.dtype.itemsize}")
            return self.sliding_window(bits, window, axes).view(x.dtype)
        return self.native.lib.stride_tricks.sliding_window_view(x, tuple(window), axis=tuple(axes))

    def einsum(self, equation: str, *operands):
        return self.native.einsum(equation, *operands, optimize=True)

    def scatter_add(self, target, indices, values):
        self.native.add.at(target, indices, values)  # unbuffered: repeated indices accumulate
        return target

    def put(self, target, indices, values):
        target[indices] = values
        return target

    def bitcast(self, x, dtype):
        return x.view(dtype)

    def softmax_in_place(self, x, axis: int):
        xp = self.xp
        x -= xp.max(x, axis=axis, keepdims=True)
        xp.exp(x, out=x)
        x /= xp.sum(x, axis=axis, keepdims=True)
        return x
