"""Elementwise ops: math given once as IR, compiled per input dtypes, fusable.

An op is elementwise when its class returns an ``ElementwiseMath`` from
``elementwise(node)``: a function from one IR expression per input to the IR
expression of the output, built with ``kuiper.ir.make`` / ``kuiper.ir.composites``.
The op runs that math compiled by the backend (``backend.compile_elementwise``:
one buffer-reusing NumPy evaluation, one CUDA kernel on CuPy), and the graph's
fusion pass composes the math of a chain of such ops into one ``kuiper.Elementwise``
op, so fused and unfused runs compute the very same IR.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import dtypes, simplify
from ..ir.nodes import Assign, Block, Function, IRExpr, Var
from ..output_buffers import PLANNED_MIN_ELEMENTS, output_array
from .base import Op, prod
from .specialize import arrays_of, guarded, same_shapes

FUSED_TYPE = "kuiper.Elementwise"
# Lent input buffers smaller than this are not reused for the result (see ElementwiseOp.lent_output).
LEND_MIN_BYTES = 4096


@dataclass(frozen=True)
class ElementwiseMath:
    """``build(*inputs) -> output``, over IR expressions, one per op input.

    ``whole_inputs`` are the positions whose value the math reads as a whole
    tensor (its shape: PNNX's ``size(@i, d)``); fusion never substitutes a
    producer's expression there.
    """

    build: Callable[..., IRExpr]
    arity: int
    whole_inputs: frozenset[int] = field(default_factory=frozenset)


# The IR dtype of an input value ('pyint' ... for Python scalars, else the array's dtype name).
dtype_name = dtypes.of_value


@functools.lru_cache(maxsize=2048)
def function_for(math: ElementwiseMath, input_dtypes: tuple[str, ...], name: str = "elementwise") -> Function:
    """The math as an IR Function over parameters ``x0, x1, ...`` of these dtypes, simplified.

    Made once per (math, dtypes): ops whose math is one long-lived function (every SiLU, every
    ReLU: ``activation.py``) share it, where building and simplifying it for each of YOLOv5's
    57 SiLU epilogues took a third of its load.  Math is equal by its ``build``'s identity.
    """
    params = tuple(Var(f"x{i}", dtype) for i, dtype in enumerate(input_dtypes))
    value = math.build(*params)
    result = Var("out", value.dtype)
    return simplify(Function(name, params, Block((Assign(result, value),)), (result,)))


@functools.lru_cache(maxsize=2048)
def compile_shared(backend, function: Function) -> Callable:
    """Compile once per (backend, function): ops with the same math share one compiled callable
    (a compiled function plans its buffers per call, so it holds no state between calls)."""
    return backend.compile_elementwise(function)


def apply(backend, build: Callable[..., IRExpr], *inputs):
    """Run IR math (``composites.sigmoid``, a lambda over ``make``) on arrays of ``backend``.

    For ops that need an elementwise function inside a larger computation (the gates
    of an LSTM): the math is still written once, in the IR, and compiled once per
    (function, input dtypes, backend).  ``build`` must be a long-lived function, not
    a fresh lambda per call, or every call compiles again.
    """
    function = _function_for_build(build, tuple(dtype_name(value) for value in inputs))
    return compile_shared(backend, function)(*inputs)


@functools.lru_cache(maxsize=512)
def _function_for_build(build: Callable, input_dtypes: tuple[str, ...]) -> Function:
    """``function_for`` keyed by the build itself: ``apply`` runs per call, where making and hashing an
    ElementwiseMath for function_for's key cost 1.6 us more than this lookup."""
    return function_for(ElementwiseMath(build, len(input_dtypes)), input_dtypes)


class ElementwiseOp(Op):
    """Runs ``self.math`` (set in ``setup``) compiled for the dtypes it meets, once per dtype combination."""

    fresh_output = True  # forward never returns an input itself
    math: ElementwiseMath

    def setup(self):
        math = type(self).elementwise(self.node)
        if math is None:
            raise self.error("is not elementwise with these params")
        self.require_inputs(math.arity)
        self.math = math
        self._compiled: dict[tuple[str, ...], tuple[Function, Callable, str | None]] = {}

    def compiled(self, inputs) -> tuple[Function, Callable, str | None]:
        """(function, compiled callable, the result's dtype if an array may hold it) for these inputs' dtypes."""
        key = tuple(map(dtype_name, inputs))
        entry = self._compiled.get(key)
        if entry is not None:
            return entry

        def compile_for_dtypes():
            function = function_for(self.math, key)
            result_dtype = function.results[0].dtype
            lendable = result_dtype if result_dtype in dtypes.TENSOR_DTYPES else None
            return function, compile_shared(self.backend, function), lendable

        return self.cached(self._compiled, key, compile_for_dtypes)

    def forward(self, *inputs):
        function, run, result_dtype = self.compiled(inputs)
        lent = self.lent_output(inputs, result_dtype) if self.donated_inputs and result_dtype is not None else None
        # A result of PLANNED_MIN_ELEMENTS or more (an input that large says so without working out the
        # result's shape) goes into an array of the memory plan's; smaller ones let the function allocate.
        if (lent is None and result_dtype is not None and self.numpy_results
                and any(getattr(value, "size", 0) >= PLANNED_MIN_ELEMENTS for value in inputs)):
            lent = output_array(self._result_shape(inputs), result_dtype)
        if lent is not None:
            return run(*inputs, out=lent)
        result = run(*inputs)
        if any(result is value for value in inputs):
            # The math simplified to one of its inputs: copy, so the output is always a fresh
            # array (the graph may lend it to the next op to overwrite).
            result = self.xp.asarray(result, copy=True)
        return result

    def specialized(self, inputs):
        """The compiled function's direct form for these inputs' classes and dtypes (the ufunc itself
        for one step), called without this forward's lookups; lending a buffer is left to ``forward``:
        the direct form is taken only below the sizes where a call lends (LEND_MIN_BYTES)."""
        if self.math is None or not arrays_of(inputs, type(inputs[0]) if inputs else None):
            return None  # no math: an op computing shapes or running exact code (its forward decides)
        _, run, _ = self.compiled(inputs)
        # A compiled path's own specialization (the interpreter's small calls), which checks its inputs
        # itself; only below the sizes where a call may lend a buffer.
        own = getattr(run, "specialized", None)
        if own is not None and (not self.donated_inputs or all(value.nbytes < LEND_MIN_BYTES for value in inputs)):
            found = own(inputs, self.forward)
            if found is not None:
                return found
        direct = getattr(run, "direct", None)
        found = direct(inputs) if direct is not None else None
        if found is None:
            return None
        function, max_size = found
        if self.donated_inputs:
            lending = self._lending(function, inputs, max_size)
            if lending is not None:
                return lending
            smallest_item = min(dtypes.itemsize(value.dtype) for value in inputs)
            lendable = -(-LEND_MIN_BYTES // smallest_item)
            max_size = lendable if max_size is None else min(max_size, lendable)
        return guarded(self._into_plan(function, inputs) or function, inputs, self.forward, max_size)

    def _into_plan(self, function, inputs):
        """For math that is one ufunc (``function``) of one or two NumPy inputs whose result has at least
        PLANNED_MIN_ELEMENTS elements: the ufunc writing into an array of the memory plan's, of the dtype
        and shape it gave the sample (``guarded`` keeps the inputs' dtypes and shapes); None otherwise."""
        if (not self.numpy_results or len(inputs) not in (1, 2) or getattr(function, "nin", None) != len(inputs)
                or getattr(function, "nout", None) != 1):
            return None
        sample = function(*inputs)
        shape, dtype = getattr(sample, "shape", ()), getattr(sample, "dtype", None)
        if dtype is None or prod(shape) < PLANNED_MIN_ELEMENTS:
            return None
        if len(inputs) == 1:
            return lambda x: function(x, out=output_array(shape, dtype))
        return lambda a, b: function(a, b, out=output_array(shape, dtype))

    def _lending(self, function, inputs, max_size):
        """For math that is one ufunc (``function``, taking the inputs in order) of one or two inputs of one
        shape and dtype, at least LEND_MIN_BYTES: the ufunc writing into the input the graph lends, as
        ``forward`` does, with ``lent_output``'s checks resolved now but for the buffer's layout and
        writeability, which each call's fresh value may lack (then a fresh result, as there).  A
        residual add of 20 x 64 floats: 6.9 us through ``forward``, under 1 direct.  None otherwise."""
        sample = inputs[0]
        if (getattr(function, "nin", None) != len(inputs) or len(inputs) > 2 or sample.nbytes < LEND_MIN_BYTES
                or (max_size is not None and sample.size >= max_size)
                or any(value.shape != sample.shape or value.dtype != sample.dtype for value in inputs)):
            return None
        _, _, result_dtype = self.compiled(inputs)
        if result_dtype != dtype_name(sample):
            return None
        position = min(self.donated_inputs)
        if len(inputs) == 1:
            def lend_one(x):
                flags = x.flags
                if flags.c_contiguous and getattr(flags, "writeable", True):
                    return function(x, out=x)
                return function(x)

            return same_shapes(inputs, lend_one, self.forward)

        def lend_two(a, b):
            buffer = b if position else a
            flags = buffer.flags
            if flags.c_contiguous and getattr(flags, "writeable", True):
                return function(a, b, out=buffer)
            return function(a, b)

        return same_shapes(inputs, lend_two, self.forward)

    def _result_shape(self, inputs) -> tuple[int, ...]:
        """The inputs' broadcast shape (an elementwise result's)."""
        shapes = [value.shape for value in inputs if self.backend.is_array(value)]
        return self.backend.native.broadcast_shapes(*shapes) if shapes else ()

    def lent_output(self, inputs, dtype: str):
        """An input buffer the graph lent of the result's shape and dtype, or None.

        Buffers under LEND_MIN_BYTES are passed over: there a fresh array costs less than the
        checks below (0.3 against 3 us for a ReLU on 1x8).  The cheap checks on each buffer come
        first; the result's shape is worked out only for a buffer that passes them."""
        is_array = self.backend.is_array
        shape = None
        for position in sorted(self.donated_inputs):
            buffer = inputs[position]
            if not (
                is_array(buffer)
                and buffer.nbytes >= LEND_MIN_BYTES
                and buffer.dtype == dtype
                and buffer.flags.c_contiguous
                # NumPy marks weights mapped from the .bin read-only; CuPy arrays have no such
                # flag (the graph lends only fresh outputs, so it is a second guard anyway).
                and getattr(buffer.flags, "writeable", True)
            ):
                continue
            if shape is None:
                shapes = [value.shape for value in inputs if is_array(value)]
                shape = shapes[0]
                if any(other != shape for other in shapes):
                    shape = self.backend.native.broadcast_shapes(*shapes)
            if tuple(buffer.shape) == shape:
                return buffer
        return None


class FusedElementwise(ElementwiseOp):
    """A chain or tree of elementwise ops that the graph's fusion pass merged; its math is in ``params``."""

    types = (FUSED_TYPE,)

    @classmethod
    def elementwise(cls, node):
        math = node.params.get("math")
        return math if isinstance(math, ElementwiseMath) else None


OPS = [FusedElementwise]
