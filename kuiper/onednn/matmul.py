"""A float32 matrix product with a constant weight, ``x @ weight^T + bias``, run by oneDNN's matmul.

This is nn.Linear's GEMM.  Run here rather than by NumPy's BLAS, it computes on the same OpenMP
threads as the convolutions, so a model that has both never has two thread pools fighting
for the cores (OpenBLAS's workers spin after each call: with a convolution on oneDNN in the
model, BLAS runs on one thread; docs/performance.md).  Post-ops (``primitives.Attributes``)
apply the op's epilogue while the output is in cache: an activation, or a sum with a
``residual`` that the output buffer holds before the call, or a product with a ``factor`` of
the output's shape (a gated linear unit's gate: ``numba_kernels/linear_native.py``).

The weight is given as the file gave it, (out, in) row-major, described to oneDNN as the (in, out)
matrix it is the transpose of; each plan asks oneDNN for the layout its kernel reads the weight in,
and the weight is reordered into that layout once, when the first plan that wants it is made
(``WeightLayouts``).  Read as the transpose, the brgemm kernel packed the weight again at every call:
ViT-Tiny's products (197 rows, 2 threads) took 214 against 195 us (qkv, 192 -> 576), 93 against 69 (the
attention's projection), 272 against 258 and 278 against 257 (the MLP): about 0.9 ms of its 20.  The
given copy is let go once the packed one exists, where the op hands its weight over.  A primitive is
made per row count and thread count the first time it is seen (about 1 ms), at most ``MAX_PLANS`` kept.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_BIAS, ARG_DST, ARG_SRC, ARG_SRC_1, ARG_WEIGHTS, Library, OneDnnError, post_op_argument
from .primitives import ONE_THREAD_WORK, Attributes, Layout, PlanCache, Primitive
from .weight_layouts import WeightLayouts


class MatMul:
    """``MatMul(library, weight, bias, post_ops)(x)``: float32 x (rows, in) times weight (out, in)
    transposed, plus bias (out,), then the post-ops, as a fresh (rows, out) array."""

    def __init__(self, library: Library, weight: np.ndarray, bias: np.ndarray | None, post_ops=()):
        self.library = library
        weight = np.ascontiguousarray(weight, dtype=np.float32)
        self.out_features, self.in_features = weight.shape
        # The (out, in) rows read as the (in, out) matrix they are the transpose of.
        self.weight_layouts = WeightLayouts(library, Layout.strided(library, (self.in_features, self.out_features),
                                                                    (1, self.in_features)), weight)
        self.bias = None
        if bias is not None:
            row = np.ascontiguousarray(np.reshape(bias, (1, self.out_features)), dtype=np.float32)
            self.bias = (Layout.plain(library, row.shape), row)
        self.post_ops = tuple(post_ops)
        self.adds_residual = ("sum",) in self.post_ops
        # The argument number of the factor a ("mul",) post-op multiplies by, or None.
        self.factor_argument = (post_op_argument(self.post_ops.index(("mul",)), ARG_SRC_1)
                                if ("mul",) in self.post_ops else None)
        self.plans = PlanCache()  # by (rows, threads); refusals by row count

    def __call__(self, x: np.ndarray, threads: int | None = None, residual: np.ndarray | None = None,
                 factor: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Run on ``threads`` (None: OpenMP's default); ``residual`` (the output's shape) is what a sum
        post-op adds, ``factor`` (float32, row-major, the output's shape) what a multiply post-op
        multiplies by; ``out`` (float32, row-major, (rows, out)) a buffer to write the result into."""
        if self.adds_residual != (residual is not None):
            raise OneDnnError("a residual is needed by a sum post-op, and only then")
        if (self.factor_argument is not None) != (factor is not None):
            raise OneDnnError("a factor is needed by a multiply post-op, and only then")
        if x.ndim != 2 or x.shape[1] != self.in_features:
            raise OneDnnError(f"the input has shape {tuple(x.shape)}, the product wants (rows, {self.in_features})")
        rows = x.shape[0]
        threads = self.library.threads(threads)
        if threads > 1 and rows * self.in_features * self.out_features < ONE_THREAD_WORK:
            threads = 1
        # Rows that lie column-major (the transpose of a row-major array: a conv's NCHW output seen as
        # tokens, PVT-v2's Mix-FFN) are read where they lie, not copied row-major first.
        column_major = x.dtype == np.float32 and not x.flags.c_contiguous and x.T.flags.c_contiguous
        product, source, result, weight = self.plan(rows, threads, column_major)
        if out is not None and (out.shape != (rows, self.out_features) or out.dtype != np.float32
                                or not out.flags.c_contiguous or residual is not None):
            raise OneDnnError(f"the output buffer must be a row-major float32 array of shape {(rows, self.out_features)}"
                              f" (and no residual), found {out.dtype} {tuple(out.shape)}")
        if residual is not None:
            if tuple(residual.shape) != (rows, self.out_features):
                raise OneDnnError(f"the residual has shape {tuple(residual.shape)}, the output "
                                  f"{(rows, self.out_features)}")
            out = np.array(residual, dtype=np.float32, order="C")  # the sum post-op adds what it holds
        elif out is None:
            out = output_array((rows, self.out_features), np.float32)
        arguments = {ARG_SRC: (source, x.T if column_major else np.ascontiguousarray(x, dtype=np.float32)),
                     ARG_WEIGHTS: weight, ARG_DST: (result, out)}
        if self.bias is not None:
            arguments[ARG_BIAS] = self.bias
        if factor is not None:
            if factor.shape != out.shape or factor.dtype != np.float32 or not factor.flags.c_contiguous:
                raise OneDnnError(f"the factor must be a row-major float32 array of shape {out.shape}, "
                                  f"found {factor.dtype} {tuple(factor.shape)}")
            arguments[self.factor_argument] = (result, factor)
        product.run(arguments, threads)
        return out

    def plan(self, rows: int, threads: int, column_major: bool = False) -> tuple[Primitive, Layout, Layout, tuple]:
        """(the primitive, its input layout, its output layout, the weight argument: its layout and the weight in
        it) for ``rows`` rows on ``threads``, the rows row-major or (``column_major``) as the transpose of a
        row-major (in, rows) array."""
        return self.plans.get_or_make((rows, threads, column_major),
                                      lambda: self._make_plan(rows, threads, column_major), refusal_key=rows)

    def _make_plan(self, rows: int, threads: int, column_major: bool) -> tuple[Primitive, Layout, Layout, tuple]:
        library = self.library
        library.set_threads(threads)  # the primitive is made for this many threads
        source = (Layout.strided(library, (rows, self.in_features), (1, rows)) if column_major
                  else Layout.plain(library, (rows, self.in_features)))
        result = Layout.plain(library, (rows, self.out_features))
        bias = self.bias[0].handle if self.bias is not None else None
        any_weight = Layout.any(library, (self.in_features, self.out_features))
        with Attributes(library, self.post_ops, operand=result) as attributes:
            product = Primitive(library, lambda pointer: library.matmul_primitive_desc_create(
                pointer, library.engine, source.handle, any_weight.handle, bias, result.handle,
                attributes.handle), f"matrix product of ({rows}, {self.in_features}) by {(self.out_features, self.in_features)}^T")
        return product, source, result, self.weight_layouts.in_layout(product.layout(ARG_WEIGHTS), threads)

    def implementation(self, rows: int, threads: int | None = None) -> str:
        return self.plan(rows, self.library.threads(threads))[0].implementation()
