"""Attention's core, ``softmax(q @ k^T * scale + masks) @ v``, on oneDNN: a matmul, a softmax, a matmul.

The three run on oneDNN's OpenMP threads, the ones the convolutions and Linear layers use.
(With a oneDNN op in the model, NumPy's BLAS runs on one thread; the compiled softmax always
did.)  q, k and v are read where they lie, whatever their strides (a transformer's heads
are strided views of one projection): oneDNN is told each array's strides.  Where oneDNN has
only its GEMM kernel for products of such strides, and its brgemm kernel for dense operands,
q, k^T and v are copied dense first: DeiT-Tiny's heads, (1, 3, 197, 64) views of its qkv
projection, took 397 us on 2 threads as they lie and 269 copied (the copies: 18 us).  The scale
is a post-op of the first product; masks are added to the scores with NumPy between the product
and the softmax, which runs in place.

Primitives are made for each set of shapes, strides and thread count the first time it is
seen (about 1 ms); at most ``MAX_PLANS`` are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_DST, ARG_SRC, ARG_WEIGHTS, Library, OneDnnError
from .primitives import Attributes, Layout, PlanCache, Primitive, reference_or_gemm

ITEM = 4  # bytes of a float32


@dataclass
class _Plan:
    scores: Primitive  # q @ k^T * scale
    softmax: Primitive  # over the scores' last dim, in place
    mix: Primitive  # weights @ v
    q: Layout
    k_t: Layout
    v: Layout
    score_layout: Layout
    out_layout: Layout
    score_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    dense: bool  # whether q, k^T and v are copied row-major first (the products' kernels are made for that)


def _strided(library: Library, array: np.ndarray) -> Layout:
    return Layout.strided(library, array.shape, [stride // ITEM for stride in array.strides])


def fits(q, k, v) -> bool:
    """Whether oneDNN takes these operands as they are: float32 arrays of one rank (2 or more), the same
    batch dims, inner dims that fit, non-empty, every stride a positive whole number of elements."""
    arrays = (q, k, v)
    if not all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim >= 2 for a in arrays):
        return False
    if not q.ndim == k.ndim == v.ndim or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return False
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or min(q.size, k.size, v.size) == 0:
        return False
    return all(stride > 0 and stride % ITEM == 0 for a in arrays for stride in a.strides)


class Attention:
    """``Attention(library)(q, k, v, scale)``: the attention output (fresh), and the weights if asked."""

    def __init__(self, library: Library):
        self.library = library
        self.plans = PlanCache()  # by shapes, strides, scale and threads

    def __call__(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, masks=(), threads: int | None = None,
                 keep_weights: bool = False):
        """(softmax(q @ k^T * scale + sum(masks)) @ v, the softmax's weights or None); OneDnnError where
        the operands do not ``fit``.  Masks broadcast against the (..., L, S) scores."""
        if not fits(q, k, v):
            raise OneDnnError(f"attention operands {q.shape}, {k.shape}, {v.shape} are not float32 arrays "
                              "oneDNN takes as they lie")
        threads = self.library.threads(threads)
        k_t = np.swapaxes(k, -1, -2)
        plan = self.plan(q, k_t, v, float(scale), threads)
        if plan.dense:
            q, k_t, v = np.ascontiguousarray(q), np.ascontiguousarray(k_t), np.ascontiguousarray(v)
        scores = np.empty(plan.score_shape, np.float32)
        plan.scores.run({ARG_SRC: (plan.q, q), ARG_WEIGHTS: (plan.k_t, k_t), ARG_DST: (plan.score_layout, scores)},
                        threads)
        for mask in masks:
            scores += mask
        plan.softmax.run({ARG_SRC: (plan.score_layout, scores), ARG_DST: (plan.score_layout, scores)}, threads)
        out = output_array(plan.out_shape, np.float32)
        plan.mix.run({ARG_SRC: (plan.score_layout, scores), ARG_WEIGHTS: (plan.v, v), ARG_DST: (plan.out_layout, out)},
                     threads)
        return out, (scores if keep_weights else None)

    def plan(self, q, k_t, v, scale: float, threads: int) -> _Plan:
        key = (q.shape, q.strides, k_t.shape, k_t.strides, v.shape, v.strides, scale, threads)
        return self.plans.get_or_make(key, lambda: self._make_plan(q, k_t, v, scale, threads))

    def _make_plan(self, q, k_t, v, scale: float, threads: int) -> _Plan:
        """The plan reading the operands where they lie, or copied row-major where only that gets oneDNN's
        brgemm kernels for the products (``reference_or_gemm`` names the others)."""
        library = self.library
        library.set_threads(threads)  # the primitives are made for this many threads
        plan = self._plan_over([_strided(library, a) for a in (q, k_t, v)], q.shape, k_t.shape, v.shape, scale,
                               dense=False)
        if not any(reference_or_gemm(product.implementation()) for product in (plan.scores, plan.mix)):
            return plan
        dense = self._plan_over([Layout.plain(library, a.shape) for a in (q, k_t, v)], q.shape, k_t.shape, v.shape,
                                scale, dense=True)
        return plan if any(reference_or_gemm(product.implementation()) for product in (dense.scores, dense.mix)) else dense

    def _plan_over(self, layouts: list[Layout], q_shape, k_t_shape, v_shape, scale: float, dense: bool) -> _Plan:
        library = self.library
        score_shape = q_shape[:-1] + (k_t_shape[-1],)
        out_shape = q_shape[:-1] + (v_shape[-1],)
        score_layout, out_layout = Layout.plain(library, score_shape), Layout.plain(library, out_shape)
        what = f"attention of {q_shape} over {v_shape}"
        post_ops = () if scale == 1.0 else (("eltwise_linear", scale, 0.0),)
        with Attributes(library, post_ops) as attributes:
            scores = Primitive(library, lambda pointer: library.matmul_primitive_desc_create(
                pointer, library.engine, layouts[0].handle, layouts[1].handle, None, score_layout.handle,
                attributes.handle), what)
        with Attributes(library) as attributes:
            softmax = Primitive(library, lambda pointer: library.softmax_forward_primitive_desc_create(
                pointer, library.engine, library.forward_inference, library.softmax_accurate, score_layout.handle,
                score_layout.handle, len(score_shape) - 1, attributes.handle), what)
            mix = Primitive(library, lambda pointer: library.matmul_primitive_desc_create(
                pointer, library.engine, score_layout.handle, layouts[2].handle, None, out_layout.handle,
                attributes.handle), what)
        return _Plan(scores, softmax, mix, *layouts, score_layout, out_layout, score_shape, out_shape, dense)
