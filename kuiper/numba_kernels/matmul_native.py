"""torch.matmul, torch.mm / torch.bmm and XLA's dot on oneDNN (kuiper.onednn.Product), for the NumPy backend.

With oneDNN found, NumPy's BLAS runs on the calling thread while a model runs
(kuiper/thread_limits.py): the cores belong to one OpenMP pool, oneDNN's and the compiled
kernels'.  A float32 product of two arrays of at least two dims each runs on that pool, at the
model's thread count, reading its operands where they lie.  Anything else (1-D operands, other
dtypes, batch dims that broadcast only from the left, layouts oneDNN has only a reference loop
for, products so small that a oneDNN call costs more than BLAS) takes the reference op.
"""

from __future__ import annotations

import math

import numpy as np

from .. import onednn
from ..limits import check_size
from ..onednn.primitives import product_on_onednn
from ..onednn.product import product_shape
from ..ops import linear as reference
from ..ops.elementwise import dtype_name
from ..ops.epilogue import WithEpilogue
from ..ops.specialize import same_shapes
from ..output_buffers import PLANNED_MIN_ELEMENTS, output_array
from ..thread_limits import requested as model_threads
from . import product_post_ops


class _OneDnnProduct:
    """The oneDNN path shared by the product ops: ``forward`` tries it, then the reference op."""

    native = None  # onednn.Product, when oneDNN is there

    def setup(self):
        super().setup()
        library = onednn.library()
        self.kernel_note = "reference path (NumPy's BLAS)"
        if library is not None:
            self.native = onednn.Product(library)
            self.kernel_note = "oneDNN matmul for float32 (NumPy's BLAS under 1 M multiply-adds)"

    def forward(self, *inputs):
        if self.native is not None:
            a, b = self.operands(inputs)
            out = self._onednn_product(a, b)
            if out is not None:
                return out
        return super().forward(*inputs)

    def specialized(self, inputs):
        """The product these shapes chose, without choosing again, while the operands keep their
        shapes and dtypes: oneDNN's call itself, or the backend's matmul (a 4 x 64 by 64 x 64 product
        in a loop body: 7.7 us through forward, ~2 direct)."""
        if len(inputs) != 2 or list(self.order) not in ([0, 1], [1, 0]):
            return None
        a, b = self.operands(inputs)
        product = self._chosen_product(a, b)
        if product is None:
            return None
        swap, forward = self.order[0] == 1, self.forward
        if isinstance(product, _RowMajorDot):
            return product.guarded(swap, forward)

        def direct(*values):
            x, y = (values[1], values[0]) if swap else values
            out = product(x, y)
            return forward(*values) if out is None else out

        return same_shapes(inputs, direct, forward)

    def _chosen_product(self, a, b):
        """``f(x, y)``: the product ``forward`` computes for operands shaped as ``a`` and ``b`` (oneDNN's
        call or the backend's matmul), None from it where oneDNN refuses the operands as they lie (then
        ``forward`` decides); None where no such function applies (batch dims to line up first)."""
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or min(a.ndim, b.ndim) < 1:
            return None
        if self.native is None or self._onednn_operands(a, b) is None:
            return _RowMajorDot.made_for(a, b) or self.xp.matmul
        if a.ndim != b.ndim:
            return None  # forward lines the batch dims up first
        native = self.native

        def product(x, y):
            try:
                return native(x, y, model_threads())
            except onednn.OneDnnError:
                return None

        return product

    @staticmethod
    def _onednn_operands(a, b):
        """(a, b with missing batch dims made 1, the product's shape) where oneDNN takes the product
        (float32 arrays of at least two dims, large enough: product_on_onednn); else None."""
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype != np.float32 \
                or b.dtype != np.float32 or min(a.ndim, b.ndim) < 2 or a.shape[-1] != b.shape[-2]:
            return None
        rank = max(a.ndim, b.ndim)
        a = a.reshape((1,) * (rank - a.ndim) + a.shape)  # NumPy's rule: missing batch dims are 1
        b = b.reshape((1,) * (rank - b.ndim) + b.shape)
        shape = product_shape(a, b)
        if shape is None or not product_on_onednn(math.prod(shape[:-1]), a.shape[-1], shape[-1]):
            return None
        return a, b, shape

    def _onednn_product(self, a, b, bias=None, post_ops=()):
        """a @ b (+ bias, one float32 per column, contiguous) on oneDNN, or None where that does not apply
        (the reference then runs, and raises its shape errors)."""
        operands = self._onednn_operands(a, b)
        if operands is None:
            return None
        a, b, shape = operands
        check_size(shape, 4, self.node.describe())
        try:
            return self.native(a, b, model_threads(), bias, post_ops)
        except onednn.OneDnnError:
            return None  # a layout or shape oneDNN does not take as it lies


class _RowMajorDot:
    """``np.dot(x, y)`` for two row-major 2-D float32 arrays shaped and laid out as the sample's, else
    ``np.matmul``: for such operands both make the same BLAS call (gemv for one row, gemm else), so the
    same bits, but matmul's ufunc machinery costs 0.45 us more a call (a Flax LSTM step's 1 x 128 by
    128 x 512 product: 3.85 against 3.40 us), twice in each of its iterations.  The strides are compared
    at each call: for others matmul may take its own loop, where dot copies to BLAS."""

    def __init__(self, a: np.ndarray, b: np.ndarray):
        self.shapes, self.strides = (a.shape, b.shape), (a.strides, b.strides)

    @classmethod
    def made_for(cls, a, b) -> "_RowMajorDot | None":
        if all(value.__class__ is np.ndarray and value.ndim == 2 and value.dtype == np.float32
               and value.flags.c_contiguous for value in (a, b)):
            return cls(a, b)
        return None

    def __call__(self, x, y):
        if x.strides == self.strides[0] and y.strides == self.strides[1]:
            return np.dot(x, y)
        return np.matmul(x, y)

    def guarded(self, swap: bool, forward):
        """A product op's specialized forward (its two inputs, ``swap``ped where the op reads them in the
        other order): the dot while the inputs are ndarrays of the sample's float32, shapes and strides
        (the checks written out in one function), ``forward`` else."""
        (shape_a, shape_b), (strides_a, strides_b) = self.shapes, self.strides
        shape_out = (shape_a[0], shape_b[1])  # the product's, before the inputs are put in the op's order
        planned = shape_out[0] * shape_out[1] >= PLANNED_MIN_ELEMENTS  # as guarded_with_bias
        if swap:
            shape_a, shape_b, strides_a, strides_b = shape_b, shape_a, strides_b, strides_a
        array, float32, dot = np.ndarray, np.dtype(np.float32), np.dot

        def direct(a, b):
            if (a.__class__ is array and b.__class__ is array and a.dtype is float32 and b.dtype is float32
                    and a.shape == shape_a and b.shape == shape_b and a.strides == strides_a
                    and b.strides == strides_b):
                x, y = (b, a) if swap else (a, b)
                return dot(x, y, out=output_array(shape_out, float32)) if planned else dot(x, y)
            return forward(a, b)

        return direct

    def guarded_with_bias(self, bias: np.ndarray, finish, forward):
        """``guarded`` for ``bias + a @ b`` then ``finish`` (an epilogue, or None), the inputs in that order
        (kuiper/graph/bias_inputs.py's AddMatrixProduct): a fori_loop's Dense + tanh on 4 x 64, 3.1 us
        through ``same_shapes`` and a product object, ~2.75 written out."""
        (shape_a, shape_b), (strides_a, strides_b) = self.shapes, self.strides
        shape_bias, array, float32, dot = bias.shape, np.ndarray, np.dtype(np.float32), np.dot
        shape_out = (shape_a[0], shape_b[1])
        # A result of PLANNED_MIN_ELEMENTS or more goes into an array of the memory plan's (the same BLAS
        # call, writing there); a smaller one lets dot allocate.
        planned = shape_out[0] * shape_out[1] >= PLANNED_MIN_ELEMENTS

        def direct(vector, a, b):
            if (a.__class__ is array and b.__class__ is array and vector.__class__ is array and a.dtype is float32
                    and b.dtype is float32 and vector.dtype is float32 and a.shape == shape_a and b.shape == shape_b
                    and vector.shape == shape_bias and a.strides == strides_a and b.strides == strides_b):
                out = dot(a, b, out=output_array(shape_out, float32)) if planned else dot(a, b)
                out += vector
                return out if finish is None else finish(out)
            return forward(vector, a, b)

        return direct


class NativeMatMul(_OneDnnProduct, reference.MatMul):
    """torch.matmul and the canonical MatMul (XLA's dot), float32 products on oneDNN."""


class NativeMM(_OneDnnProduct, reference.MM):
    """torch.mm and torch.bmm, float32 products on oneDNN (ranks checked by the reference first)."""

    def forward(self, *inputs):
        a, b = self.operands(inputs)
        self.check_rank("input", a, (self.rank,))
        self.check_rank("mat2", b, (self.rank,))
        return super().forward(*inputs)


class NativeAddMM(WithEpilogue, _OneDnnProduct, reference.AddMM):
    """torch.addmm and a product + bias vector (kuiper/graph/bias_inputs.py): on oneDNN, the bias its
    matmul's bias argument, added as each result is stored (the same float32 sum as adding it after:
    tests/numba_kernels/test_matmul_native.py checks bit for bit) rather than in a pass over the result;
    where BLAS takes the product, the bias is added into its fresh result, as the reference adds it.

    The fusion pass may give it the one-input elementwise math that reads its output (a Dense layer's
    GELU or ReLU; kuiper/ops/epilogue.py): oneDNN applies it as post-ops where it has them
    (product_post_ops.py), else it runs after the product, as the elementwise op would have."""

    unary_epilogues_only = True  # its own inputs are all read per call: no epilogue input comes after them

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give an unbatched ``a @ b + bias`` its elementwise reader."""
        params = node.params
        return (len(node.inputs) == 3 and not params.get("batched", False)
                and float(params.get("alpha", 1.0)) == 1.0 and float(params.get("beta", 1.0)) == 1.0)

    def setup(self):
        super().setup()
        self.read_epilogue()
        # oneDNN's post-op steps for the epilogue: () without one, None where it runs after the product.
        self.post_ops = product_post_ops.post_ops_for(self.epilogue)
        if self.epilogue is not None:
            where = "as oneDNN post-ops" if self.post_ops is not None else "after the product"
            self.kernel_note += f"; epilogue {', '.join(self.node.params.get('epilogue_members', []))} {where}"

    def weights_are_constant(self) -> bool:
        """Only one-input epilogues come here (``unary_epilogues_only``): no input after the op's own three
        is the epilogue's, whether or not the weights are constants."""
        return True

    def forward(self, *inputs):
        bias, a, b = self.operands(inputs)
        out = None
        if self.native is not None and self._adds_vector(bias, a, b):
            if bias.flags.c_contiguous:
                out = self._onednn_product(a, b, bias, self.post_ops or ())
                if out is not None and self.post_ops is not None:
                    return out  # the epilogue, if any, applied by oneDNN
            else:
                out = self._onednn_product(a, b)
                if out is not None:
                    out += bias
        if out is None:
            out = reference.AddMM.forward(self, *inputs)
        return out if self.epilogue is None else self.run_epilogue(out, ())

    def _adds_vector(self, bias, a, b) -> bool:
        """Whether this is ``a @ b + bias``: 2-D float32 operands, bias one float32 value per column."""
        return (not self.batched and self.alpha == 1.0 and self.beta == 1.0 and isinstance(bias, np.ndarray)
                and bias.dtype == np.float32 and bias.ndim == 1 and getattr(b, "ndim", 0) == 2
                and getattr(a, "ndim", 0) == 2 and bias.shape[0] == b.shape[1])

    def specialized(self, inputs):
        """The product these shapes chose, the bias (and the epilogue's post-ops) applied by oneDNN, or the
        bias added in place after BLAS and the epilogue after that, while the operands keep their shapes
        and dtypes."""
        if len(inputs) != 3:
            return None
        bias, a, b = self.operands(inputs)
        if not self._adds_vector(bias, a, b):
            return None
        order, forward = list(self.order), self.forward
        bias_at, a_at, b_at = order  # indexes, not a generator per call (0.4 us of a loop body's small product)
        if (self.native is not None and self.post_ops is not None and self._onednn_operands(a, b) is not None
                and a.ndim == b.ndim):
            native, post_ops = self.native, self.post_ops

            def on_onednn(*values):
                vector, x, y = values[bias_at], values[a_at], values[b_at]
                if not vector.flags.c_contiguous:
                    return forward(*values)
                try:
                    return native(x, y, model_threads(), vector, post_ops)
                except onednn.OneDnnError:
                    return forward(*values)

            return same_shapes(inputs, on_onednn, forward)
        product = self._chosen_product(a, b)
        if product is None:
            return None
        epilogue, limit = self._direct_epilogue(bias, a, b, product)
        if isinstance(product, _RowMajorDot) and order == [0, 1, 2]:
            finish = epilogue if epilogue is None or a.shape[0] * b.shape[1] < limit else \
                (lambda out: self.run_epilogue(out, ()))
            return product.guarded_with_bias(bias, finish, forward)

        def direct(*values):
            vector, x, y = values[bias_at], values[a_at], values[b_at]
            out = product(x, y)
            if out is None:
                return forward(*values)
            out += vector
            if epilogue is None:
                return out
            return epilogue(out) if out.size < limit else self.run_epilogue(out, ())

        return same_shapes(inputs, direct, forward)

    def _direct_epilogue(self, bias, a, b, product):
        """(f, size limit): the epilogue's compiled function in its direct form for a result like this
        call's (the ufunc itself for a tanh; what the elementwise op's own specialized step calls), used
        below the limit; (None, 0) without an epilogue.  Where it has no direct form, ``run_epilogue``
        (its lookups cost a few us a call: a loop body's small product runs it 16 times a call)."""
        if self.epilogue is None:
            return None, 0
        sample = product(a, b)
        if sample is None:
            return (lambda out: self.run_epilogue(out, ())), float("inf")
        sample += bias
        _, run = self.compiled_epilogue((dtype_name(sample),))
        found = run.direct([sample]) if getattr(run, "direct", None) is not None else None
        if found is None:
            return (lambda out: self.run_epilogue(out, ())), float("inf")
        function, max_size = found
        return function, float("inf") if max_size is None else max_size


KERNELS = [NativeMatMul, NativeMM, NativeAddMM]
