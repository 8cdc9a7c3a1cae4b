"""A float32 matrix product of two arrays that arrive at run time, ``a @ b``, run by oneDNN's matmul.

``torch.matmul`` and XLA's ``dot`` come here when both operands are float32 arrays: computed on
oneDNN's OpenMP threads rather than by NumPy's BLAS, a model's products share one pool with its
convolutions and compiled kernels (docs/performance.md, "One OpenMP pool").  Each operand is read
where it lies, whatever its strides (a transposed view, one head of a projection), and the batch
dims broadcast where one side has 1, as NumPy's do.  oneDNN's reference implementation (an
element-by-element loop it falls back on for layouts no fast kernel takes) is refused, so the
caller keeps NumPy's BLAS for those.

A primitive is made for each pair of shapes and strides and thread count the first time it is
seen (about 1 ms); at most ``MAX_PLANS`` are kept.

A product of two matrices of at most ``GEMM_MAX_ROWS`` rows (a Dense layer at a small batch, a
recurrent step) calls oneDNN's GEMM (``dnnl_sgemm``) instead, whose kernels for few rows the matmul
primitive lacks: 8 x 784 by 784 x 512 took 78 against 156 us (one thread), and its call costs one
ctypes call rather than a plan lookup and memory objects.  Its bias is added to the result after the
product and a ReLU applied in place, as the primitive applies them (the same float32 operations).
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_BIAS, ARG_DST, ARG_SRC, ARG_WEIGHTS, Library, OneDnnError
from .primitives import Attributes, Layout, PlanCache, Primitive

ITEM = 4  # bytes of a float32
GEMM_MAX_ROWS = 64  # the most rows a product has to run on dnnl_sgemm (measured up to 128: 0.7-1.0x the primitive)
RELU = ("eltwise_relu", 0.0, 0.0)  # the one post-op the GEMM path applies itself


def element_strides(array: np.ndarray) -> tuple[int, ...] | None:
    """``array``'s strides in elements, as oneDNN takes them; None where it cannot (a broadcast view's
    zero stride, a negative or odd one).  A dim of size 1 is never stepped along, so NumPy may give it
    any stride: it gets the extent of the dims inside it, as a row-major array's would have."""
    strides = [0] * array.ndim
    extent = 1
    for axis in reversed(range(array.ndim)):
        size, stride = array.shape[axis], array.strides[axis]
        if size == 1:
            strides[axis] = extent
        elif stride <= 0 or stride % ITEM:
            return None
        else:
            strides[axis] = stride // ITEM
        extent = max(extent, strides[axis] * size)
    return tuple(strides)


def gemm_reading(strides: tuple[int, ...], shape: tuple[int, ...]) -> tuple[bytes, int] | None:
    """How dnnl_sgemm (row-major) reads a matrix of ``shape`` lying with these element strides: (b"N", the row
    stride) for row-major rows, (b"T", the column stride) for row-major columns (a transposed view); None for
    anything else."""
    (row_step, column_step), (rows, columns) = strides, shape
    if column_step == 1 and row_step >= columns:
        return b"N", row_step
    if row_step == 1 and column_step >= rows:
        return b"T", column_step
    return None


def product_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...] | None:
    """The shape of ``a @ b`` for two arrays of one rank (2 or more) whose batch dims are equal or 1,
    else None."""
    if a.ndim != b.ndim or a.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return None
    batch = []
    for left, right in zip(a.shape[:-2], b.shape[:-2]):
        if left != right and 1 not in (left, right):
            return None
        batch.append(max(left, right))
    return (*batch, a.shape[-2], b.shape[-1])


class Product:
    """``Product(library)(a, b, threads)``: ``a @ b`` as a fresh row-major float32 array; with ``bias`` (one
    float32 per column, contiguous) ``a @ b + bias``, and ``post_ops`` (oneDNN's element-wise steps, as
    ``Attributes`` takes them: ``("eltwise_gelu_tanh", 0.0, 0.0)``) applied to that while it is in cache."""

    def __init__(self, library: Library):
        self.library = library
        self.plans = PlanCache()  # by shapes, strides, bias, post-ops and threads
        self.ran_gemm = False  # whether a call took dnnl_sgemm (GEMM_MAX_ROWS)

    def __call__(self, a: np.ndarray, b: np.ndarray, threads: int | None = None, bias: np.ndarray | None = None,
                 post_ops: tuple = ()) -> np.ndarray:
        """OneDnnError where oneDNN does not take the operands as they lie (see the module's notes)."""
        shape = product_shape(a, b)
        a_strides, b_strides = element_strides(a), element_strides(b)
        if a.dtype != np.float32 or b.dtype != np.float32 or shape is None or None in (a_strides, b_strides):
            raise OneDnnError(f"a product of {a.dtype} {a.shape} and {b.dtype} {b.shape} is not one oneDNN takes "
                              "as the arrays lie")
        if 0 in shape or a.shape[-1] == 0:
            raise OneDnnError(f"a product of {a.shape} and {b.shape} is empty")
        if bias is not None and (bias.dtype != np.float32 or bias.shape != shape[-1:] or not bias.flags.c_contiguous):
            raise OneDnnError(f"a bias of {bias.dtype} {bias.shape} is not one float32 per column of {shape}, "
                              "contiguous")
        threads = self.library.threads(threads)
        if len(shape) == 2 and shape[0] <= GEMM_MAX_ROWS and all(step == RELU for step in post_ops):
            a_read, b_read = gemm_reading(a_strides, a.shape), gemm_reading(b_strides, b.shape)
            if a_read is not None and b_read is not None:
                return self._gemm(a, b, a_read, b_read, shape, threads, bias, bool(post_ops))
        key = (a.shape, a_strides, b.shape, b_strides, bias is not None, post_ops, threads)
        product, a_layout, b_layout, out_layout, bias_layout = self.plans.get_or_make(
            key, lambda: self._make_plan(a.shape, a_strides, b.shape, b_strides, shape, threads, bias is not None,
                                         post_ops))
        out = output_array(shape, np.float32)
        arguments = {ARG_SRC: (a_layout, a), ARG_WEIGHTS: (b_layout, b), ARG_DST: (out_layout, out)}
        if bias is not None:
            arguments[ARG_BIAS] = (bias_layout, bias)
        product.run(arguments, threads)
        return out

    def _gemm(self, a, b, a_read, b_read, shape, threads: int, bias, relu: bool) -> np.ndarray:
        """``a @ b`` (+ bias, then ReLU) by dnnl_sgemm, each operand read where it lies (``gemm_reading``)."""
        rows, columns = shape
        out = output_array(shape, np.float32)
        self.library.set_threads(threads)
        status = self.library.sgemm(a_read[0], b_read[0], rows, columns, a.shape[1], 1.0, a.ctypes.data, a_read[1],
                                    b.ctypes.data, b_read[1], 0.0, out.ctypes.data, columns)
        if status:  # the message is made only for a failure: this runs at every small product
            self.library.check(status, f"GEMM of {a.shape} by {b.shape}")
        if bias is not None:
            out += bias
        if relu:
            np.maximum(out, 0.0, out=out)
        self.ran_gemm = True
        return out

    def _make_plan(self, a_shape, a_strides, b_shape, b_strides, shape, threads: int, bias: bool = False,
                   post_ops: tuple = ()):
        library = self.library
        library.set_threads(threads)  # the primitive is made for this many threads
        a_layout = Layout.strided(library, a_shape, a_strides)
        b_layout = Layout.strided(library, b_shape, b_strides)
        out_layout = Layout.plain(library, shape)
        # oneDNN's bias has the output's rank, 1 along every dim it is repeated over.
        bias_layout = Layout.plain(library, (1,) * (len(shape) - 1) + (shape[-1],)) if bias else None
        what = f"matrix product of {a_shape} (strides {a_strides}) by {b_shape} (strides {b_strides})"
        with Attributes(library, post_ops) as attributes:
            product = Primitive(library, lambda pointer: library.matmul_primitive_desc_create(
                pointer, library.engine, a_layout.handle, b_layout.handle,
                None if bias_layout is None else bias_layout.handle, out_layout.handle, attributes.handle), what)
        implementation = product.implementation()
        if implementation.startswith("ref"):
            raise OneDnnError(f"{what}: oneDNN offers only its reference loop ({implementation})")
        return product, a_layout, b_layout, out_layout, bias_layout
