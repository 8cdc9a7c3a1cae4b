"""Reductions over dims: sum, mean, prod, max/min (+ indices), amax/amin, argmax/argmin,
norm, logsumexp, var/std; and the general ``Reduce`` (a named or sub-graph reducer, N operands).

``dim`` is an int, a list of ints, or None (= every dim), with PyTorch's meaning for
negative values; ``keepdim`` keeps reduced dims as size 1.  A full reduction gives a
0-d array (never a bare NumPy scalar, so later ops still see an array).
"""

from __future__ import annotations

import math

from ..ir import dtypes
from .base import Op, normalize_axis
from .params import Bool, Choice, Ints
from .reducers import Reducer, accumulation_dtype, combine, identity, operands_and_inits
from .specialize import arrays_of, same_shapes


class Reduction(Op):
    """Shared parsing of ``dim`` / ``keepdim`` and the ``$input`` operand."""

    # True where PyTorch takes a single dim only (prod, argmax, max with indices).
    single_dim = False
    arity = 1
    params = (Ints("dim", default=None, attr="dims"), Bool("keepdim", default=False))

    def setup(self):
        if self.single_dim and self.dims is not None and len(self.dims) != 1:
            raise self.unsupported("dim", self.param("dim"), "a single dim")
        if self.has_param("dtype"):
            raise self.unsupported("dtype", self.param("dtype"), [None])

    def axes(self, x) -> tuple[int, ...] | None:
        """The dims as 0-based axes of ``x``, or None for all of them."""
        if self.dims is None:
            return None
        axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims) if x.ndim else ()
        if len(set(axes)) != len(axes):
            raise self.error(f"dim {self.dims} names the same dim twice for a tensor of rank {x.ndim}")
        return axes

    def array(self, value):
        """A 0-d result as an array of the backend (NumPy reductions return scalars)."""
        return value if self.backend.is_array(value) else self.xp.asarray(value)


class SumMeanProd(Reduction):
    types = ("Reduction",)
    params = (*Reduction.params, Choice("reduction", ("sum", "mean", "prod")))

    def setup(self):
        super().setup()
        self.function = getattr(self.xp, self.reduction)  # xp.sum, xp.mean, xp.prod

    def forward(self, x):
        axes = self.axes(x)
        if axes == ():  # a 0-d input: nothing to reduce
            return x
        return self.array(self.function(x, axis=axes, keepdims=self.keepdim))


class ExtremumReduction(Reduction):
    """A reduction to the max or the min: param ``reduction``."""

    params = (*Reduction.params, Choice("reduction", ("max", "min")))

    def setup(self):
        super().setup()
        self.is_max = self.reduction == "max"


class AMaxAMin(ExtremumReduction):
    """The max or min (``reduction``) over any number of dims: values only. The max of no values is the
    reduction's identity (-inf, or the type's lowest value; False for bool), as XLA's reduce and ONNX
    define it; PyTorch raises there."""

    types = ("Extremum",)

    def forward(self, x):
        axes = self.axes(x)
        if axes == ():
            return x
        if x.size == 0:
            return empty_reduction(self.xp, x, axes, self.keepdim, self.reduction)
        function = self.xp.max if self.is_max else self.xp.min
        return self.array(function(x, axis=axes, keepdims=self.keepdim))


def empty_reduction(xp, x, axes: tuple[int, ...] | None, keepdim: bool, reducer: str):
    """Reducing an empty ``x`` over ``axes``: every output element is reducer ``reducer``'s identity."""
    reduced = range(x.ndim) if axes is None else axes
    shape = tuple(1 if d in reduced else n for d, n in enumerate(x.shape) if keepdim or d not in reduced)
    return xp.asarray(xp.broadcast_to(identity(xp, reducer, x.dtype), shape), copy=True)


class MaxMin(ExtremumReduction):
    """torch.max / torch.min.

    Without dim: the 0-d max of everything.  With dim: values and (int64) indices,
    as two outputs; pnnx drops the indices output when nothing reads it.
    """

    types = ("ExtremumWithIndex",)
    single_dim = True

    def setup(self):
        super().setup()
        outputs = len(self.node.outputs)
        if self.dims is None and outputs != 1:
            raise self.error(f"without 'dim' gives one output, the file declares {outputs}")
        if outputs not in (1, 2):
            raise self.error(f"gives values and indices (2 outputs), the file declares {outputs}")
        self.with_indices = outputs == 2

    def forward(self, x):
        xp = self.xp
        is_max = self.is_max
        axes = self.axes(x)
        if axes is None:
            return self.array((xp.max if is_max else xp.min)(x))
        axis = axes[0] if axes else None
        if axis is None:  # 0-d input: value itself, index 0
            values, indices = x, xp.zeros((), dtype=xp.int64)
        else:
            values = (xp.max if is_max else xp.min)(x, axis=axis, keepdims=self.keepdim)
            if not self.with_indices:
                return values
            indices = (xp.argmax if is_max else xp.argmin)(x, axis=axis, keepdims=self.keepdim)
        if not self.with_indices:
            return values
        return values, xp.astype(indices, xp.int64)


class ArgMaxMin(ExtremumReduction):
    """torch.argmax / torch.argmin (int64).  dim=None indexes the flattened tensor; with
    keepdim=True every dim is then kept as size 1, as PyTorch does."""

    types = ("ArgExtremum",)
    single_dim = True

    def forward(self, x):
        xp = self.xp
        function = xp.argmax if self.is_max else xp.argmin
        axes = self.axes(x)
        if axes is None:
            flat = function(xp.reshape(x, (-1,)))
            out = xp.reshape(flat, (1,) * x.ndim) if self.keepdim else flat
        elif axes == ():
            out = xp.zeros((), dtype=xp.int64)
        else:
            out = function(x, axis=axes[0], keepdims=self.keepdim)
        return xp.astype(self.array(out), xp.int64)


class Norm(Reduction):
    """torch.norm as a vector norm over ``dim`` (what PyTorch computes for numeric p):
    p=2 (and 'fro'), 1, inf, -inf, 0 (count of nonzeros) and any other positive p."""

    types = ("Norm",)

    def setup(self):
        super().setup()
        # pnnx writes torch.linalg.vector_norm and p='fro' as torch.norm with p=2.
        p = self.param("p", 2)
        if p == "fro":
            p = 2
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise self.unsupported("p", p, "2, 'fro', 1, inf, -inf, 0 or another number")
        self.p = float(p)

    def forward(self, x):
        xp = self.xp
        axes = self.axes(x)
        if axes == ():
            axes = None  # a 0-d input: reduce it (identity up to abs/power)
        kw = {"axis": axes, "keepdims": self.keepdim}
        p = self.p
        if p == 2:  # the common case (GRN, L2 normalisation): no |x| pass
            return self.array(xp.sqrt(xp.sum(x * x, **kw)))
        magnitude = xp.abs(x)
        if p == math.inf:
            out = xp.max(magnitude, **kw)
        elif p == -math.inf:
            out = xp.min(magnitude, **kw)
        elif p == 0:
            out = xp.sum(xp.astype(magnitude != 0, x.dtype), **kw)
        elif p == 1:
            out = xp.sum(magnitude, **kw)
        else:
            out = xp.sum(magnitude**p, **kw) ** (1.0 / p)
        return self.array(out)


class LogSumExp(Reduction):
    """log(sum(exp(x))) over dims, shifted by the max so exp() cannot overflow."""

    types = ("LogSumExp",)

    def forward(self, x):
        xp = self.xp
        axes = self.axes(x)
        if axes == ():
            return x
        if x.size == 0:  # log(0): -inf, the identity of a max
            return empty_reduction(xp, x, axes, self.keepdim, "max")
        peak = xp.max(x, axis=axes, keepdims=True)
        # An all -inf (or inf) slice would give inf - inf = nan; shift by 0 there instead.
        peak = xp.where(xp.isfinite(peak), peak, xp.zeros_like(peak))
        total = xp.sum(xp.exp(x - peak), axis=axes, keepdims=True)
        # log(0) = -inf for an all -inf slice, without NumPy's divide-by-zero warning.
        empty = total == 0
        log_total = xp.log(xp.where(empty, xp.ones_like(total), total))
        out = xp.where(empty, xp.full_like(total, -math.inf), log_total + peak)
        if not self.keepdim:
            out = xp.squeeze(out, axis=axes if axes is not None else tuple(range(x.ndim)))
        return self.array(out)


class VarStd(Reduction):
    """torch.var / torch.std with Bessel's correction (``unbiased`` or ``correction``)."""

    types = ("Variance",)
    params = (*Reduction.params, Bool("standard_deviation", default=False))

    def setup(self):
        super().setup()
        if self.has_param("correction"):
            self.correction = self.float_param("correction")
        else:
            self.correction = 1.0 if self.bool_param("unbiased", default=True) else 0.0

    def forward(self, x):
        xp = self.xp
        axes = self.axes(x)
        if axes == ():
            axes = None
        out = xp.var(x, axis=axes, correction=self.correction, keepdims=self.keepdim)
        if self.standard_deviation:
            out = xp.sqrt(out)
        return self.array(out)


class Reduce(Op):
    """Inputs ``operands..., inits...``: each operand reduced over ``axes`` from its init.

    ``reducer``: a name (one operand), or a sub-graph taking ``(accumulators..., elements...)``
    and returning the N new accumulators (variadic reductions: argmax's (value, index) pairs).
    Outputs keep each operand's dtype; the reduced axes are dropped. ``sequential``: fold the
    elements one after another, each step in the operand's dtype (kuiper/ops/reducers.py).
    """

    types = ("Reduce",)
    params = (Ints("axes"), Bool("sequential", default=False))

    def setup(self):
        self.count = operands_and_inits(self)
        self.reducer = Reducer(self, "reducer", self.count)

    def forward(self, *inputs):
        arrays, inits = list(inputs[: self.count]), list(inputs[self.count :])
        rank = arrays[0].ndim
        if any(not 0 <= a < rank for a in self.axes) or len(set(self.axes)) != len(self.axes):
            raise self.error(f"axes {list(self.axes)} must be distinct dims of a rank-{rank} operand")
        results = self.reducer.reduce(arrays, inits, self.axes, sequential=self.sequential)
        return results[0] if self.count == 1 else tuple(results)

    def specialized(self, inputs):
        """For one operand and a named reducer, not folded in order, while the operand and init keep this
        call's class, dtype and shape: over axes of size 1 only, the one element combined with the init
        (``_over_unit_axes``); over others, the array's own reduction and one combine with the init
        (``_as_array_reduction``).  Both compute what ``reduce_named`` computes."""
        if self.count != 1 or self.reducer.name is None or self.sequential or len(inputs) != 2:
            return None
        x, init = inputs
        if not (self.backend.is_array(x) and self.backend.is_array(init)) or init.ndim != 0 \
                or any(not 0 <= a < x.ndim for a in self.axes) or len(set(self.axes)) != len(self.axes):
            return None
        if all(x.shape[a] == 1 for a in self.axes):
            return self._over_unit_axes(inputs)
        return self._as_array_reduction(inputs)

    def _over_unit_axes(self, inputs):
        """``combine(x, init)`` in x's shape without the reduced axes (JAX's ``take`` checks its (1, T, 1)
        index bounds with such a reduce_and: 39 us a call through the reduction, a reshape and a logical
        and direct)."""
        x, _ = inputs
        if accumulation_dtype(self.xp, x.dtype) != x.dtype:
            return None
        kept = tuple(d for i, d in enumerate(x.shape) if i not in self.axes)
        xp, name, forward = self.xp, self.reducer.name, self.forward

        def direct(values, start):
            if start.ndim != 0:
                return forward(values, start)
            result = combine(xp, name, xp.reshape(values, kept), xp.astype(start, values.dtype, copy=False))
            return xp.asarray(xp.astype(result, values.dtype, copy=False))  # an array, as reduce_named gives

        return same_shapes(inputs, direct, forward)

    def _as_array_reduction(self, inputs):
        """The array's own reduction and one combine with the init (a while loop's ``max(|h|) > tol``:
        12 us -> 3 on 4 x 64).  Not for bool or float16 operands (reduce_named widens or renames them), nor
        an empty reduced dim."""
        x, init = inputs
        xp, name = self.xp, self.reducer.name
        if name not in _ARRAY_REDUCTIONS or not (
                arrays_of(inputs, type(x)) and hasattr(x, _ARRAY_REDUCTIONS[name]) and init.dtype == x.dtype
                and xp.isdtype(x.dtype, ("integral", "real floating")) and dtypes.name_of(x.dtype) != "float16"):
            return None
        if any(x.shape[a] == 0 for a in self.axes):
            return None
        axes, asarray = tuple(self.axes), xp.asarray
        method, combine_with = _ARRAY_REDUCTIONS[name], getattr(xp, _COMBINES[name])
        if name in ("add", "mul"):
            dtype = x.dtype

            def direct(x, init):
                return asarray(combine_with(getattr(x, method)(axis=axes, dtype=dtype), init))
        else:
            def direct(x, init):
                return asarray(combine_with(getattr(x, method)(axis=axes), init))

        return same_shapes(inputs, direct, self.forward)


# The named reducers a specialized Reduce runs as the array's method, then the combine with the init
# (kuiper/ops/reducers.py: reduce_named's calls for these).
_ARRAY_REDUCTIONS = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}
_COMBINES = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


OPS = [Reduce, SumMeanProd, AMaxAMin, MaxMin, ArgMaxMin, Norm, LogSumExp, VarStd]
