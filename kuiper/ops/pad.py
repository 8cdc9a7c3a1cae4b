"""Padding: F.pad and the nn.*Pad* modules (params ``padding`` and, for constant pads, ``value``).

``pad`` lists (before, after) pairs starting from the LAST dim, as PyTorch
does: ``(left, right, top, bottom)`` pads W then H.  A negative amount crops
that side.  With a crop on one side and a pad on the other, ATen's kernels
differ: reflect and replicate mirror/repeat about the original edges (so a
reflection may reach into the cropped part), circular wraps the cropped tensor.
We follow each (checked against torch 2.x on thousands of random cases).
"""

from __future__ import annotations

from ..errors import ShapeError
from ..limits import check_size
from .base import Op
from .params import Choice, Float, Ints

MODES = ("constant", "reflect", "replicate", "circular")


class PadBase(Op):
    """Subclasses set ``self.pad`` (PyTorch order), ``self.mode`` and ``self.value`` in setup."""

    def check_pad(self, key: str) -> None:
        if len(self.pad) % 2:
            raise self.error(f"param '{key}' must hold (before, after) pairs, found {list(self.pad)}")

    def forward(self, x):
        pairs = len(self.pad) // 2
        if pairs > x.ndim:
            raise ShapeError(f"{self.node.describe()}: pads {pairs} dims of a rank-{x.ndim} input {tuple(x.shape)}")
        # pads[axis] = (before, after), from PyTorch's last-dim-first list.
        pads = [(0, 0)] * x.ndim
        for i in range(pairs):
            pads[x.ndim - 1 - i] = (self.pad[2 * i], self.pad[2 * i + 1])
        for axis, (before, after) in enumerate(pads):
            if x.shape[axis] + before + after < 0:
                raise ShapeError(f"{self.node.describe()}: pads {list(self.pad)} crop away all of shape {tuple(x.shape)}")
        growing = [(max(b, 0), max(a, 0)) for b, a in pads]
        if self.mode in ("reflect", "replicate"):
            # ATen mirrors / repeats about the ORIGINAL edges, then drops the cropped parts.
            self._check_sizes(x.shape, growing)
            return self._crop(self.backend.pad(x, tuple(growing), self.mode), pads)
        # constant: the order does not matter; circular: ATen wraps the cropped tensor.
        x = self._crop(x, pads)
        self._check_sizes(x.shape, growing)
        return self.backend.pad(x, tuple(growing), self.mode, value=self.value)

    def _crop(self, x, pads):
        """Drop ``-amount`` elements on every side whose amount is negative."""
        if not any(b < 0 or a < 0 for b, a in pads):
            return x
        key = tuple(slice(-min(b, 0), max(-min(b, 0), size + min(a, 0))) for size, (b, a) in zip(x.shape, pads))
        return x[key]

    def _check_sizes(self, shape, growing) -> None:
        """PyTorch's limits: reflect pads < size, circular pads <= size, replicate needs a non-empty dim.

        Also the size budget (kuiper.limits) for the padded result."""
        grown = tuple(size + before + after for size, (before, after) in zip(shape, growing))
        check_size(grown, 8, self.node.describe())
        for axis, (before, after) in enumerate(growing):
            size = shape[axis]
            if not (before or after):
                continue
            if self.mode == "reflect" and max(before, after) >= size:
                raise ShapeError(
                    f"{self.node.describe()}: reflect padding ({before}, {after}) must be smaller than dim {axis} of size {size}"
                )
            if self.mode == "circular" and max(before, after) > size:
                raise ShapeError(
                    f"{self.node.describe()}: circular padding ({before}, {after}) must not exceed dim {axis} of size {size}"
                )
            if self.mode == "replicate" and size == 0:
                raise ShapeError(f"{self.node.describe()}: cannot replicate-pad an empty dim {axis}")


class FunctionalPad(PadBase):
    """F.pad(input, pad, mode, value); ``value=None`` means 0."""

    types = ("PadWithMode",)
    arity = 1
    params = (Ints("pad"), Choice("mode", MODES, default="constant"), Float("value", default=None))

    def setup(self):
        self.check_pad("pad")
        if self.value is None:
            self.value = 0.0


class ModulePad(PadBase):
    """nn.*PadNd(padding[, value]): an int pads every side of the last ``spatial`` dims."""

    spatial = 2
    mode = "constant"
    default_value = 0.0

    def setup(self):
        self.require_inputs(1)
        self.pad = self.ints_param("padding", 2 * self.spatial)
        self.check_pad("padding")
        self.value = self.float_param("value", default=self.default_value) if self.mode == "constant" else 0.0


class ZeroPad1d(ModulePad):
    types = ("ZeroPad1d",)
    mode, spatial = "constant", 1


class ZeroPad2d(ModulePad):
    types = ("ZeroPad2d",)
    mode, spatial = "constant", 2


class ZeroPad3d(ModulePad):
    types = ("ZeroPad3d",)
    mode, spatial = "constant", 3


class ConstantPad1d(ModulePad):
    types = ("ConstantPad1d",)
    mode, spatial = "constant", 1


class ConstantPad2d(ModulePad):
    types = ("ConstantPad2d",)
    mode, spatial = "constant", 2


class ConstantPad3d(ModulePad):
    types = ("ConstantPad3d",)
    mode, spatial = "constant", 3


class ReflectionPad1d(ModulePad):
    types = ("ReflectionPad1d",)
    mode, spatial = "reflect", 1


class ReflectionPad2d(ModulePad):
    types = ("ReflectionPad2d",)
    mode, spatial = "reflect", 2


class ReflectionPad3d(ModulePad):
    types = ("ReflectionPad3d",)
    mode, spatial = "reflect", 3


class ReplicationPad1d(ModulePad):
    types = ("ReplicationPad1d",)
    mode, spatial = "replicate", 1


class ReplicationPad2d(ModulePad):
    types = ("ReplicationPad2d",)
    mode, spatial = "replicate", 2


class ReplicationPad3d(ModulePad):
    types = ("ReplicationPad3d",)
    mode, spatial = "replicate", 3


class CircularPad1d(ModulePad):
    types = ("CircularPad1d",)
    mode, spatial = "circular", 1


class CircularPad2d(ModulePad):
    types = ("CircularPad2d",)
    mode, spatial = "circular", 2


class CircularPad3d(ModulePad):
    types = ("CircularPad3d",)
    mode, spatial = "circular", 3


OPS = [
    FunctionalPad,
    ZeroPad1d, ZeroPad2d, ZeroPad3d,
    ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
    ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
    CircularPad1d, CircularPad2d, CircularPad3d,
]
