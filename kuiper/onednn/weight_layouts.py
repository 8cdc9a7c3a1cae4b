"""One constant weight, in each layout oneDNN's kernels asked for; the given copy let go once a kept one exists.

oneDNN's fast kernels read a constant weight in a layout of their own (a convolution's ``OIhw16i16o``, a
matrix product's packed blocks), so the weight is reordered once per layout a plan wants and kept
(``in_layout``).  The array the model was given is then needed only where the weight is read as given:
the reference path, the model's IR.  Where its owner allows (``let_go_when_kept``, set when the op hands
its weight over: kuiper/graph/kept_weights.py), the given array is dropped as soon as a kept layout
holds its numbers, and ``given`` remakes it from there on demand: a reorder back copies each number, so
the remade array holds the same bits.  YOLOv5 held 28 MB of convolution weights twice, given and
blocked, and ViT-B/16 the 226 MB of its MLPs' Linear weights, given and packed; ONNX Runtime keeps only
its packed copy.

Several convolutions may share one ``WeightLayouts`` (a pointwise conv and the partition running it with
its depthwise reader): a layout one of them made serves the others, and the given array is dropped once.
"""

from __future__ import annotations

import numpy as np

from .binding import ARG_DST, ARG_SRC, Library
from .primitives import Layout, reorder


class WeightLayouts:
    """``WeightLayouts(library, layout, array)``: ``array`` (float32, row-major) in the memory ``layout``
    describes (its own shape, or the grouped shape oneDNN reads it as)."""

    def __init__(self, library: Library, layout: Layout, array: np.ndarray):
        self.library = library
        self.given_layout = layout
        self.shape = tuple(array.shape)
        self._given: np.ndarray | None = array
        self._given_read = False  # whether a plan reads the given array itself (its kernel's layout is that one)
        # Whether the given array is dropped once a kept layout holds its numbers (and no plan reads it).
        self.let_go_when_kept = False
        self.kept: list[tuple[Layout, np.ndarray]] = []  # (layout, buffer) for each other layout a plan wanted

    @property
    def given(self) -> tuple[Layout, np.ndarray]:
        """The weight as it was given, (its layout, the array): once that is let go, a fresh array remade
        from a kept layout at each call."""
        array = self._given  # read once: another thread may let go of it meanwhile
        if array is not None:
            return self.given_layout, array
        source = self.kept[0]
        remade = np.empty(self.shape, np.float32)
        self._reorder(source, (self.given_layout, remade), threads=1)
        return self.given_layout, remade

    @property
    def holds_given(self) -> bool:
        return self._given is not None

    def in_layout(self, layout: Layout, threads: int) -> tuple[Layout, np.ndarray]:
        """The weight in ``layout``: the given array where that is its layout (and it is not let go), else
        reordered once, on ``threads`` (the count the caller has set), and kept.  The reorder reads the given
        array, or a kept layout once that is let go; the first layout kept lets go of the given array where
        ``let_go_when_kept`` allows."""
        for kept in self.kept:
            if kept[0] == layout:
                return kept
        array = self._given
        if array is not None and layout == self.given_layout:
            self._given_read = True
            return self.given_layout, array
        source = (self.given_layout, array) if array is not None else self.kept[0]
        target = (layout, layout.empty())
        self._reorder(source, target, threads)
        self.kept.append(target)
        if self.let_go_when_kept and not self._given_read:
            self._given = None
        return target

    def _reorder(self, source: tuple[Layout, np.ndarray], target: tuple[Layout, np.ndarray], threads: int) -> None:
        self.library.set_threads(threads)  # a primitive is made for the thread count it runs on
        reorder(self.library, source[0], target[0]).run({ARG_SRC: source, ARG_DST: target}, threads=threads)
