"""nn.Linear on oneDNN (kuiper.onednn.MatMul), for the NumPy backend's kernels.

A float32 Linear with a constant weight runs its GEMM on oneDNN's OpenMP threads, the ones
the convolutions use, at the model's thread count: with a convolution on oneDNN in the model,
NumPy's BLAS runs on one thread (kuiper/thread_limits.py), so a transformer's Linear layers
ran on one core (docs/performance.md).  The fusion pass may give it the elementwise op that
reads it (GELU, ReLU, a residual add) as an epilogue, which oneDNN applies as post-ops while
the output is in cache; an epilogue it has no post-ops for runs after the oneDNN product, as the
elementwise op would have.

A gated linear unit's epilogue (the math of the output's two halves, ``silu(a) * b`` in a SwiGLU
MLP; kuiper/graph/fusion.py) runs as two products: the gate's half of the weight with its
activation as a post-op, then the other half with a multiply by the gate as a post-op, so no
elementwise pass reads the doubled output (EVA-02-Ti's (257, 1024) fc1: 0.44-0.60 ms against
0.71-0.99 for the product and NumPy's passes, in one process).

Anything else (a shared weight, another dtype, a residual that broadcasts, a product so small
that a call to oneDNN costs more than NumPy's BLAS) takes the reference op.
"""

from __future__ import annotations

import math

import numpy as np

from .. import onednn
from ..limits import check_size
from ..onednn.primitives import memory_ordered, product_on_onednn
from ..ops import linear as reference
from ..ops.special_values import linear_bound, outputs_tame
from ..ops.specialize import same_shapes
from ..thread_limits import requested as model_threads
from . import conv_post_ops
from .blas_weights import row_major


# Features (in and out) up to which a Linear of an input whose last axis is outermost in memory runs as
# W @ x on NumPy's BLAS (``_product_along_outer_axis``): there each output element takes a few
# multiply-adds, and copying x row-major for oneDNN cost more than the product (CaiT-XXS24's 48 talking-
# heads Linears over 4 heads, (1, 196, 196, 4) views: 45 us against 260-300; the model 0.76 of before).
# Wider ones (Mixer's token mixing, 196 to 256 over 512 rows) keep oneDNN's threads (there BLAS on one
# thread took the model from 47 to 56 ms).
OUTER_AXIS_FEATURES = 16


class NativeLinear(reference.Linear):
    """nn.Linear with its GEMM (and epilogue) on oneDNN where it applies, else the reference op."""

    native = None  # the oneDNN product (with the epilogue as post-ops), when it runs this op
    _output_bound = None  # linear_bound of the weight and bias, on the first oneDNN call
    gate = None  # with a gated epilogue: the gate's product, its activation as a post-op (native multiplies by it)
    takes_split_epilogue = True  # the fusion pass may give it the math of its output's halves
    epilogue_after = False  # whether the epilogue runs after the oneDNN product (it has no post-ops for it)
    weight_laid_out = False  # whether weight_t is as NumPy's BLAS multiplies it fastest (blas_weights.py)
    _weight_t = None  # W^T, where the op holds it (see weight_t)
    # The WeightLayouts of oneDNN's products once the weight is handed over to them: the whole weight's, or a
    # gated product's two halves' in the order of their rows.
    _handed_over: tuple = ()

    @property
    def weight_t(self):
        """W^T as the products NumPy's BLAS runs read it.  Once the weight is handed over to oneDNN
        (``hand_over_weights``): the given weight while oneDNN's products hold it (a gated one's halves
        joined), then remade from the packed copies, once, and kept (a Linear fed both many rows and one)."""
        held = self._weight_t
        if held is not None or not self._handed_over:
            return held
        weight = self._given_weight()
        if not all(layouts.holds_given for layouts in self._handed_over):
            self._weight_t = weight.T
        return weight.T

    @weight_t.setter
    def weight_t(self, value):
        self._weight_t = value

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give a Linear with a constant weight its elementwise reader."""
        return "weight" in node.attrs and len(node.inputs) == 1

    def setup(self):
        super().setup()
        self.kernel_note = "reference path (NumPy's BLAS)"
        library = onednn.library()
        if library is None or self.weight_t is None or self.weight_t.dtype != np.float32:
            return
        if self.bias is not None and self.bias.dtype != np.float32:
            return  # NumPy promotes the sum to the bias's dtype: the reference keeps that
        if self.epilogue is not None and self.epilogue_halves:
            post_ops = self._gate_products(library)
        else:
            post_ops = conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0))
        # An epilogue oneDNN has no post-ops for (ResMLP's layer scale and residual) runs after the
        # product, compiled, as the elementwise op would have: the product still gets the threads.
        self.epilogue_after = post_ops is None
        if self.native is None:
            self.native = onednn.MatMul(library, self.weight_t.T, self.bias, post_ops or ())
        self.kernel_note = "oneDNN matmul (NumPy's BLAS under 1 M multiply-adds or for one row)"
        if self.epilogue is not None:
            where = "after the product" if self.epilogue_after else "as post-ops"
            self.kernel_note += f"; epilogue {', '.join(self.node.params.get('epilogue_members', []))} {where}"

    def hand_over_weights(self) -> dict:
        """The node's weight, to oneDNN's products (``onednn.WeightLayouts``), which drop the given array once
        they have packed it (a transformer's products all run there; a gated one's two halves each)."""
        if self.native is None or self._weight_t is None or "weight" not in self.node.attrs:
            return {}
        halves = (self.native,) if self.gate is None else self._halves
        self._handed_over = tuple(product.weight_layouts for product in halves)
        for layouts in self._handed_over:
            layouts.let_go_when_kept = True
        self._weight_t = None
        return {"weight": self._given_weight}

    def _given_weight(self) -> np.ndarray:
        """The (out, in) weight as given, from the products it was handed over to (not kept here)."""
        halves = [layouts.given[1] for layouts in self._handed_over]
        return halves[0] if len(halves) == 1 else np.concatenate(halves)

    def _gate_products(self, library):
        """For a gated epilogue oneDNN can run: the gate's product (``gate``) and the other half's with a
        multiply by it (``native``), each on its half of the weight's rows (views, no copies); returns
        their post-ops, or None when the math is something else (it then runs after the whole product)."""
        found = conv_post_ops.gate_for(self.epilogue, self.epilogue_operand)
        if found is None or self.shape[0] % 2:
            return None
        gate_half, activation = found
        weight, width = self.weight_t.T, self.shape[0] // 2
        rows = (slice(0, width), slice(width, None))
        gate_rows, value_rows = rows[gate_half], rows[1 - gate_half]
        bias = (None, None) if self.bias is None else (self.bias[gate_rows], self.bias[value_rows])
        self.gate = onednn.MatMul(library, weight[gate_rows], bias[0], activation)
        self.native = onednn.MatMul(library, weight[value_rows], bias[1], (("mul",),))
        self._halves = (self.gate, self.native) if gate_half == 0 else (self.native, self.gate)  # in row order
        return (("mul",),)

    def forward(self, *inputs):
        axis = _outer_axis(inputs[0]) if max(self.shape) <= OUTER_AXIS_FEATURES and self.weight_t is not None else None
        if axis is not None and self._bias_fits(inputs[0]):
            out = self._product_along_outer_axis(inputs[0], axis)
            return out if self.epilogue is None else self.run_epilogue(out, inputs[1:])
        if self.native is not None:
            out = self._onednn_forward(inputs[0], inputs[1:])
            if out is not None:
                return out
        if not self.weight_laid_out and self.weight_t is not None:  # the first product on NumPy's BLAS
            self.weight_t, self.weight_laid_out = row_major(self.backend, self.weight_t), True
        return super().forward(*inputs)

    def specialized(self, inputs):
        """For a product NumPy's BLAS takes (too small for oneDNN): the GEMM, the bias and the epilogue
        called directly while x (and each extra input of the epilogue: a residual) keeps its shape and
        dtype and x lies row-major, as ``forward`` computes them (a 20 x 64 by 64 x 256 Linear with its
        ReLU: 15 us through forward, 9 direct)."""
        x, extras = inputs[0], list(inputs[1:])
        if (not self.weight_laid_out or self.weight_t is None or not isinstance(x, np.ndarray)
                or x.dtype != np.float32 or x.ndim == 0 or not x.flags.c_contiguous
                or x.shape[-1] != self.in_features or (self.bias is not None and self.bias.dtype != np.float32)
                or not all(isinstance(extra, np.ndarray) and extra.dtype == np.float32 for extra in extras)):
            return None
        if self.native is not None and product_on_onednn(math.prod(x.shape[:-1]), self.in_features, self.shape[0]):
            return None  # oneDNN's path: forward keeps its NaN guard and post-ops
        epilogue = self._direct_epilogue(x.shape[:-1] + (self.shape[0],), extras)
        if epilogue is False:
            return None
        weight_t, bias, forward, xp = self.weight_t, self.bias, self.forward, self.xp
        position = self.epilogue_operand if self.epilogue is not None else 0

        def direct(*values):
            value = values[0]
            if not value.flags.c_contiguous:
                return forward(*values)  # a permuted x takes forward's product along its outer axis
            out = reference.matmul_last_dim(xp, value, weight_t)
            if bias is not None:
                out += bias
            if epilogue is None:
                return out
            arguments = list(values[1:])
            arguments.insert(position, out)
            return epilogue(*arguments)

        return same_shapes(inputs, direct, forward)

    def _direct_epilogue(self, out_shape, extras):
        """The epilogue as a direct function of its inputs (the op's result at its place, the extras as
        they are now), None with no epilogue, False where it has none (halves) or would take another
        path for inputs of these sizes."""
        if self.epilogue is None:
            return None
        if self.epilogue_halves:
            return False
        arguments = list(extras)
        arguments.insert(self.epilogue_operand, np.zeros(out_shape, np.float32))
        _, run = self.compiled_epilogue(("float32",) * len(arguments))
        direct = getattr(run, "direct", None)
        found = direct(arguments) if direct is not None else None
        if found is None or (found[1] is not None and any(value.size >= found[1] for value in arguments)):
            return False
        return found[0]

    def _bias_fits(self, x) -> bool:
        """Whether x has the op's input width and its bias (if any) x's dtype, so W @ x + b keeps x's dtype."""
        return x.shape[-1] == self.in_features and (self.bias is None or self.bias.dtype == x.dtype)

    def _product_along_outer_axis(self, x, axis: int):
        """x @ W^T + b for an x whose last axis lies outside all but its first ``axis`` axes in memory (a
        permuted view: CaiT's talking heads mix the 4 heads of (N, 4, 196, 196) attention maps viewed as
        (N, 196, 196, 4)): W @ x as the (in, rest) matrices it is, on NumPy's BLAS, and the (out, rest)
        result returned as the (..., out) view of it, with no copy of x either way."""
        check_size(x.shape[:-1] + (self.shape[0],), 4, self.node.describe())
        columns = np.moveaxis(x, -1, axis)
        lead = columns.shape[:axis]
        out = np.matmul(self.weight_t.T, np.reshape(columns, lead + (self.in_features, -1)))
        if self.bias is not None:
            out += self.bias[:, None]
        return np.moveaxis(np.reshape(out, lead + (self.shape[0],) + columns.shape[axis + 1:]), axis, -1)

    def _onednn_forward(self, x, extras):
        """The product (and its epilogue) on oneDNN, or None where it does not apply to these inputs."""
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim == 0 or x.shape[-1] != self.in_features:
            return None  # the reference takes these, and raises its shape errors
        rows = math.prod(x.shape[:-1])  # Python's product: NumPy's costs 5-8 us a call, a small Linear's whole GEMM
        if not product_on_onednn(rows, self.in_features, self.shape[0]):  # both products of a gated one
            return None
        out_shape = x.shape[:-1] + (self.native.out_features,)
        residual = None
        if self.native.adds_residual:
            residual = extras[0]
            if not isinstance(residual, np.ndarray) or residual.shape != out_shape or residual.dtype != np.float32:
                return None  # a broadcast or another dtype: the reference runs the epilogue after the product
            residual = np.reshape(residual, (rows, -1))
        if self._output_bound is None:
            self._output_bound = linear_bound(np, self.weight_t, self.bias)
        if not outputs_tame(np, memory_ordered(x), self._output_bound, residual):
            return None  # NaN, +-inf or outputs that could overflow: oneDNN's ReLU and clip post-ops drop NaN
        check_size(out_shape, 4, self.node.describe())
        x_rows = np.reshape(x, (rows, self.in_features))
        try:
            if self.gate is not None:
                out = self.native(x_rows, model_threads(), factor=self.gate(x_rows, model_threads()))
            else:
                out = self.native(x_rows, model_threads(), residual=residual)
        except onednn.OneDnnError:
            return None  # oneDNN refused this shape
        out = np.reshape(out, out_shape)
        return self.run_epilogue(out, extras) if self.epilogue_after else out


def _outer_axis(x) -> int | None:
    """Where x's last axis lies in memory, when that is outermost (0) or next to a first, batch axis (1)
    and the other axes lie row-major inside it: moving the last axis there gives a C-contiguous array.
    None for anything else (a row-major x among them)."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim < 2 or x.flags.c_contiguous:
        return None
    for axis in (0, 1):
        if axis < x.ndim - 1 and np.moveaxis(x, -1, axis).flags.c_contiguous:
            return axis
    return None


KERNELS = [NativeLinear]
