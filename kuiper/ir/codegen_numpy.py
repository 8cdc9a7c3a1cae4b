"""Compile an elementwise IR Function to a Python callable over an array namespace.

``compile_elementwise(fn, xp)(*inputs)`` evaluates the function on arrays of
``xp`` (NumPy, CuPy, or any array-API namespace) and Python scalars.  There is
no eval/exec: the function is linearized and each assignment becomes a row of
a step table; a call runs the rows in order over a register list.

Buffers are planned like registers.  Each temporary's last use is known at
compile time; when a temporary dies its buffer goes back to a free list and
the next result of the same dtype and shape reuses it, through ``out=``
(NumPy and CuPy ufuncs; an operand's own buffer may be the output).  Shapes
are only known at call time, so two plans are prepared: one for the common
case where all tensor inputs have the same shape (every full-size temporary
can share), one keyed by the set of inputs a value depends on (whose
broadcast shape it has).  Functions a namespace offers without ``out=``
simply allocate their result.

Python-scalar values (``size()`` arithmetic) are computed on the host, with
the same semantics (kuiper/ir/scalars.py).

Everything that does not depend on the call is decided at construction: each
assignment becomes a row of a step table (its array function, operand
registers, buffer slot, dtype), constants get registers of their own, and a
call only fills the registers and walks the table, so a call on a tiny array
costs a few microseconds over the NumPy functions themselves.
"""

from __future__ import annotations

import contextvars
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy

from kuiper.errors import InputError, ShapeError
from kuiper.ir import dtypes
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import Assign, Const, DimSize, Function, IRExpr, Var
from kuiper.ir.printer import print_ir
from kuiper.ir.scalars import apply_to_scalars
from kuiper.ir.xp_ops import clip_against, resolve

_ALL_INPUTS = "all"  # the dependency key of full-size values when all inputs share a shape

# True inside ``floating_point_warnings_off``: the compiled functions called there skip entering
# numpy.errstate themselves (1.5-2 us of a residual add's 5 on a small tensor).
_warnings_off = contextvars.ContextVar("kuiper_floating_point_warnings_off", default=False)


class floating_point_warnings_off:
    """``with floating_point_warnings_off():`` NumPy's floating-point warnings off for the block, as
    every compiled function has them (PyTorch neither warns on inf/nan nor on x/0).  A model call
    enters it once (``Backend.floating_point_warnings_off``), so its ops need not each enter it."""

    def __enter__(self):
        self._state = numpy.errstate(all="ignore")
        self._state.__enter__()
        self._token = _warnings_off.set(True)

    def __exit__(self, *exc_info):
        _warnings_off.reset(self._token)
        self._state.__exit__(*exc_info)


def _quietly(function):
    """``function`` run with NumPy's floating-point warnings off, entering errstate only where no
    caller has (the decorator form is made once and is thread-safe: each call has its own token)."""
    quiet = numpy.errstate(all="ignore")(function)

    def run(*args):
        return function(*args) if _warnings_off.get() else quiet(*args)

    return run


def compile_elementwise(fn: Function, xp=None) -> CompiledExpression:
    return CompiledExpression(fn, numpy if xp is None else xp)


@dataclass(frozen=True)
class _Instruction:
    target: int  # register number
    value: IRExpr  # the operation; operands are Vars / Consts
    operands: tuple[int | Const, ...]  # register numbers, or constants
    kind: str  # "array", "scalar" (host Python value) or "size"
    depends_on: frozenset[int]  # tensor parameters whose broadcast shape the value has


class CompiledExpression:
    """The callable ``compile_elementwise`` returns; ``print_ir(self.fn)`` shows what it runs."""

    def __init__(self, fn: Function, xp):
        self.fn = linearize(fn)
        self.xp = xp
        self._params = self.fn.params
        self._param_dtypes = [_xp_dtype(xp, p.dtype) for p in self._params]
        self._registers = {p: i for i, p in enumerate(self._params)}
        self._instructions = self._translate()
        self._results = [self._operand(_assigned(self.fn, r)) for r in self.fn.results]
        self._constants: list = []  # constant operands' values, in registers after the instructions'
        self._uniform_plan = self._plan(uniform=True)
        self._general_plan = self._plan(uniform=False)
        self.uniform_buffers = len(self._uniform_plan.slot_dtypes)
        self.general_buffers = len(self._general_plan.slot_dtypes)
        # Every call's registers: the inputs, then one per instruction, then the constants.
        self._register_tail = [None] * len(self._instructions) + self._constants
        self._tensor_params = [i for i, p in enumerate(self._params) if not dtypes.is_scalar(p.dtype)]
        self._later_tensor_params = self._tensor_params[1:]  # compared with the first one's shape per call
        self._array_type = getattr(xp, "ndarray", None)  # inputs of this exact type skip _accept's checks
        result = self.fn.results[0]
        single_tensor = not (self.fn.returns_list or dtypes.is_scalar(result.dtype) or result.dtype == dtypes.SHAPE)
        self._out_dtype = _xp_dtype(xp, result.dtype) if single_tensor else None  # what out= must be
        # PyTorch neither warns on inf/nan nor on x/0.
        self._evaluate = _quietly(self._evaluate_steps)
        # A function of one array step over its tensor inputs and constants (a residual add, a
        # ReLU) runs it directly when the inputs are arrays of one shape and of the compiled
        # dtypes: a quarter of the step table's 4 us on a small tensor.
        self._one_step = self._single_step()
        self._run_one_step = self._clip_step() or _quietly(self._single_step_call)

    # --- compile time ---------------------------------------------------------------------

    def _translate(self) -> list[_Instruction]:
        instructions = []
        depends: dict[int, frozenset[int]] = {
            i: frozenset([i]) if not dtypes.is_scalar(p.dtype) else frozenset() for i, p in enumerate(self._params)
        }
        for stmt in self.fn.body.stmts:
            if stmt.target in self.fn.results:
                continue  # result assignments name a leaf; handled in __call__
            register = len(self._registers)
            self._registers[stmt.target] = register
            value = stmt.value
            operands = () if isinstance(value, DimSize) else tuple(self._operand(c) for c in value.children())
            deps = frozenset().union(*(depends.get(op, frozenset()) for op in operands if isinstance(op, int)))
            if isinstance(value, DimSize):
                kind = "size"
                operands = (self._registers[value.tensor],)
            elif dtypes.is_scalar(value.dtype):
                kind = "scalar"
            else:
                kind = "array"
            depends[register] = deps
            instructions.append(_Instruction(register, value, operands, kind, deps))
        return instructions

    def _operand(self, leaf: IRExpr) -> int | Const:
        if isinstance(leaf, Const):
            return leaf
        if isinstance(leaf, Var) and leaf in self._registers:
            return self._registers[leaf]
        raise ValueError(f"operand {leaf} is neither a constant nor a defined variable")

    def _plan(self, uniform: bool) -> _Plan:
        """Assign buffers to array temporaries, reusing dead ones; make the step table."""
        last_use: dict[int, int] = {}
        for index, inst in enumerate(self._instructions):
            for op in inst.operands:
                if isinstance(op, int):
                    last_use[op] = index
        for result in self._results:
            if isinstance(result, int):
                last_use[result] = len(self._instructions)  # results live to the end
        free: dict[tuple, list[int]] = defaultdict(list)
        slot_of: dict[int, int] = {}
        slot_keys: list[tuple] = []
        steps = []
        for index, inst in enumerate(self._instructions):
            for op in set(inst.operands):
                if isinstance(op, int) and last_use.get(op) == index and op in slot_of:
                    free[slot_keys[slot_of[op]]].append(slot_of[op])
            xp_op = resolve(self.xp, inst.value) if inst.kind == "array" else None
            slot = None
            if xp_op is not None and xp_op.supports_out:
                key = (self._shape_key(inst.depends_on, uniform), dtypes.storage_dtype(inst.value.dtype))
                if free[key]:
                    slot = free[key].pop()
                else:
                    slot = len(slot_keys)
                    slot_keys.append(key)
                slot_of[inst.target] = slot
            steps.append(self._step(inst, xp_op, slot))
        slot_dtypes = tuple(_xp_dtype(self.xp, dtype) for _, dtype in slot_keys)
        return _Plan(tuple(steps), tuple(shape_key for shape_key, _ in slot_keys), slot_dtypes)

    @staticmethod
    def _shape_key(depends_on: frozenset[int], uniform: bool):
        if uniform:
            return _ALL_INPUTS if depends_on else frozenset()
        return depends_on

    def _step(self, inst: _Instruction, xp_op, slot: int | None) -> tuple:
        """One row of the step table: ``(host, target, fn, sources, slot, dtype, first_dtype)``.

        ``sources`` are register numbers (constants have registers of their own, filled once).
        A host step (sizes, Python-scalar arithmetic) is ``fn(regs)``; an array step stores
        ``fn(*operands)`` into ``target``, through ``out=`` when it has a buffer ``slot``.
        """
        target, operands = inst.target, inst.operands
        sources = tuple(self._source(op) for op in operands)
        if inst.kind == "size":
            axis, source = inst.value.axis, sources[0]
            if axis is None:
                return (True, target, lambda regs: [int(n) for n in regs[source].shape], (), None, None, None)
            return (True, target, lambda regs: _dim_size(regs[source], axis, source), (), None, None, None)
        if inst.kind == "scalar":
            node = inst.value
            return (True, target, lambda regs: apply_to_scalars(node, [regs[i] for i in sources]), (), None, None, None)
        # With no array operand (e.g. a cast of a size), make one so the result has the dtype.
        needs_array = not any(isinstance(op, int) and self._is_array(op) for op in operands)
        first_dtype = _xp_dtype(self.xp, _dtype_of(operands[0], self)) if needs_array else None
        return (False, target, xp_op.fn, sources, slot, _xp_dtype(self.xp, inst.value.dtype), first_dtype)

    def _source(self, operand: int | Const) -> int:
        """The register an operand is read from; a constant gets one, filled in every call's registers."""
        if isinstance(operand, int):
            return operand
        self._constants.append(operand.value)
        return len(self._params) + len(self._instructions) + len(self._constants) - 1

    def _is_array(self, register: int) -> bool:
        if register < len(self._params):
            return not dtypes.is_scalar(self._params[register].dtype)
        inst = self._instructions[register - len(self._params)]
        return inst.kind == "array"

    def _single_step(self):
        """(ufunc, its operands: an input's position or a constant's value) when the uniform plan is one
        array step whose result is the function's, over tensor inputs and constants; else None."""
        steps = self._uniform_plan.steps
        if len(steps) != 1 or len(self._tensor_params) != len(self._params) or self.fn.returns_list:
            return None
        host, target, fn, sources, slot, _, first_dtype = steps[0]
        if host or slot is None or first_dtype is not None or self._results != [target]:
            return None
        inputs, first_constant = len(self._params), len(self._params) + len(self._instructions)
        operands = []
        for source in sources:
            if source < inputs:
                operands.append((True, source))
            elif source >= first_constant:
                operands.append((False, self._register_tail[source - inputs]))
            else:
                return None  # another instruction's result: more than one step
        return fn, tuple(operands)

    def _clip_step(self):
        """The single step as ``run(inputs, shape, out)`` when it is one clip of its one input against
        a constant (a ReLU, a clamp: xp_ops.clip_against); else None.  A clip raises no floating-point
        warnings, so it runs without errstate's context (a ReLU on a small tensor: 12 us -> 4)."""
        if self._one_step is None or len(self._one_step[1]) != 2:
            return None
        fn, ((first_is_input, first), (second_is_input, second)) = self._one_step
        if first_is_input == second_is_input:
            return None
        position, constant = (first, second) if first_is_input else (second, first)
        clip = clip_against(self.xp, fn, constant, self._param_dtypes[position])
        if clip is None:
            return None
        empty, dtype = self.xp.empty, self._out_dtype

        def clip_step(inputs, shape, out):
            if out is None and shape == ():
                out = empty((), dtype=dtype)  # a clip of a 0-d array gives a NumPy scalar, not an array
            return clip(inputs[position], out)

        return clip_step

    def direct(self, inputs) -> tuple[Callable, None] | None:
        """(a function computing this expression straight from inputs of the classes and dtypes of
        ``inputs``, None: no size limit) for a specialized forward (the caller checks the classes and
        dtypes: kuiper.ops.specialize.guarded), run with NumPy's warnings already off (a model call
        holds errstate).  The function is the one ufunc itself when the expression is one step whose
        natural result dtype is the compiled one, else this object's own call.  None for inputs of
        other dtypes than compiled."""
        if len(inputs) != len(self._params) or not all(
            value.__class__ is self._array_type and value.dtype == expected
            for value, expected in zip(inputs, self._param_dtypes)
        ):
            return None
        if self._one_step is None:
            return self, None
        fn, operands = self._one_step
        if any(value.ndim == 0 for value in inputs):
            # A ufunc of 0-d arrays gives a NumPy scalar: an array comes only through out=.
            return self._zero_d_step(inputs, fn, operands), None
        clip = self._clip_step()
        if clip is not None:
            return (lambda *xs: clip(xs, None, None)), None
        arguments = [inputs[value] if is_input else value for is_input, value in operands]
        probe = fn(*arguments)
        if probe.__class__ is not self._array_type or probe.dtype != self._out_dtype \
                or any(probe is value for value in inputs):
            return self, None
        if all(is_input for is_input, _ in operands) and [value for _, value in operands] == list(range(len(inputs))):
            return fn, None  # the inputs in order: the ufunc takes them as they come
        if len(inputs) == 1 and len(operands) == 2 and operands[0][0] != operands[1][0]:
            # One input and one constant (a loop's ``h * 0.5``): the call written out, where the general
            # form's list cost 0.4 us of its 1.2.
            (first_is_input, first), (_, second) = operands
            return ((lambda x: fn(x, second)) if first_is_input else (lambda x: fn(first, x))), None
        return (lambda *xs: fn(*[xs[value] if is_input else value for is_input, value in operands])), None

    def _zero_d_step(self, inputs, fn, operands) -> Callable:
        """The single step into a fresh 0-d array, while every input is 0-d (a loop's counter and its
        bound: 1 us where this call's own checks cost 3); this call for other inputs (and for a clip,
        whose own step keeps the array)."""
        if self._clip_step() is not None or len(inputs) > 2 or not all(value.ndim == 0 for value in inputs):
            return self
        empty, dtype, run = self.xp.empty, self._out_dtype, self
        if len(inputs) == 1:
            ((first_is_input, first), *rest) = operands
            if not rest and first_is_input:
                return lambda x: fn(x, out=empty((), dtype=dtype)) if x.ndim == 0 else run(x)
            if len(rest) == 1 and first_is_input and not rest[0][0]:
                constant = rest[0][1]
                counter = self._counter_step(fn, constant)
                if counter is not None:
                    return counter
                return lambda x: fn(x, constant, out=empty((), dtype=dtype)) if x.ndim == 0 else run(x)
            if len(rest) == 1 and not first_is_input and rest[0][0]:
                return lambda x: fn(first, x, out=empty((), dtype=dtype)) if x.ndim == 0 else run(x)
            return self
        if [value for _, value in operands] == [0, 1] and all(is_input for is_input, _ in operands):
            return lambda a, b: fn(a, b, out=empty((), dtype=dtype)) if a.ndim == 0 == b.ndim else run(a, b)
        return self

    def _counter_step(self, fn, constant) -> Callable | None:
        """For ``x + constant`` of a NumPy integer dtype (a loop's counter): the sum of Python ints, wrapped
        into the dtype's range as the ufunc wraps it, into a fresh 0-d array (0.45 us, the ufunc with
        out= 0.9).  None for other steps, namespaces, or a constant the ufunc would refuse (out of range)."""
        dtype = self._out_dtype
        if fn is not numpy.add or self.xp is not numpy or type(constant) is not int or dtype is None \
                or numpy.dtype(dtype).kind not in "iu" or self._param_dtypes[0] != dtype:
            return None
        info = numpy.iinfo(dtype)
        low, high, span = int(info.min), int(info.max), int(info.max) - int(info.min) + 1
        if not low <= constant <= high:
            return None
        array, run = numpy.array, self

        def counter(x):
            if x.ndim != 0:
                return run(x)
            total = int(x) + constant
            return array(total if low <= total <= high else (total - low) % span + low, dtype)

        return counter

    def _single_step_call(self, inputs, shape, out):
        fn, operands = self._one_step
        if out is None:
            out = self.xp.empty(shape, dtype=self._out_dtype)
        return fn(*[inputs[value] if is_input else value for is_input, value in operands], out=out)

    # --- run time ------------------------------------------------------------------------

    def __call__(self, *inputs, out=None):
        if self._one_step is not None and len(inputs) == len(self._params):
            shape = self._one_step_shape(inputs, out)
            if shape is not None:
                return self._run_one_step(inputs, shape, out)
        if len(inputs) != len(self._params):
            raise InputError(f"expression {self.fn.name} takes {len(self._params)} inputs, got {len(inputs)}")
        if out is not None and (self._out_dtype is None or out.dtype != self._out_dtype):
            self._check_out(out)
        regs = list(inputs)
        array_type = self._array_type
        for index, expected in enumerate(self._param_dtypes):
            value = regs[index]
            if value.__class__ is not array_type or value.dtype != expected:
                regs[index] = self._accept(index, value)
        tensors = self._tensor_params
        common_shape = regs[tensors[0]].shape if tensors else ()
        uniform = True
        for index in self._later_tensor_params:
            if regs[index].shape != common_shape:
                uniform = False
                break
        regs.extend(self._register_tail)
        final_target = self._results[0] if out is not None else -1
        template = self._layout_template(regs) if uniform else None
        self._evaluate(self._uniform_plan if uniform else self._general_plan, regs, out, final_target, common_shape,
                       template)
        values = [self._result_value(result, regs) for result in self._results]
        if out is not None and values[0] is not out:
            out[...] = values[0]
            values[0] = out
        return values if self.fn.returns_list else values[0]

    def _one_step_shape(self, inputs, out):
        """The inputs' one shape when the single step takes them as they are (arrays of the compiled
        dtypes, and ``out`` None or of that shape and the result's dtype); else None."""
        array_type, shape = self._array_type, None
        for value, expected in zip(inputs, self._param_dtypes):
            if value.__class__ is not array_type or value.dtype != expected:
                return None
            if shape is None:
                shape = value.shape
            elif value.shape != shape:
                return None
        if out is not None and (out.__class__ is not array_type or out.shape != shape or out.dtype != self._out_dtype):
            return None
        return shape

    def _layout_template(self, regs: list):
        """The first tensor input when it is a permuted view (an NHWC view of NCHW data: what a transpose
        hands on), for the buffers to be laid out as it is; None when the first is row-major.  A ufunc
        writing a row-major buffer from such a view reads it across its strides: a batch norm + ReLU over
        a transposed 64 x 112 x 112 activation took 1.5 ms so, 0.5 ms in the view's own order."""
        if not self._tensor_params:
            return None
        first = regs[self._tensor_params[0]]
        flags = getattr(first, "flags", None)
        if flags is None or flags.c_contiguous or 0 in first.strides:
            return None
        return first

    def _evaluate_steps(self, plan: _Plan, regs: list, out, final_target: int, common_shape: tuple,
                        template=None) -> None:
        """Run the step table over ``regs`` (under numpy.errstate(all="ignore"), see __init__); the buffers
        of the inputs' shape laid out as ``template`` is, when one is given."""
        xp = self.xp
        buffers = [None] * len(plan.slot_dtypes)
        for host, target, fn, sources, slot, dtype, first_dtype in plan.steps:
            if host:
                regs[target] = fn(regs)
                continue
            args = [regs[i] for i in sources]
            if first_dtype is not None:
                args[0] = xp.asarray(args[0], dtype=first_dtype)
            if slot is None:
                result = fn(*args)
                regs[target] = result if result.dtype == dtype else xp.astype(result, dtype)
                continue
            if target == final_target:
                buffer = out
            else:
                buffer = buffers[slot]
                if buffer is None:
                    if template is not None and plan.slot_shape_keys[slot] == _ALL_INPUTS:
                        buffer = xp.empty_like(template, dtype=plan.slot_dtypes[slot])
                    else:
                        buffer = xp.empty(plan.shape(slot, regs, common_shape), dtype=plan.slot_dtypes[slot])
                    buffers[slot] = buffer
            regs[target] = fn(*args, out=buffer)

    def _check_out(self, out) -> None:
        result = self.fn.results[0]
        if self.fn.returns_list or dtypes.is_scalar(result.dtype) or result.dtype == dtypes.SHAPE:
            raise InputError("out= is only supported for a single tensor result")
        if out.dtype != _xp_dtype(self.xp, result.dtype):
            raise InputError(f"out= has dtype {out.dtype}; the expression computes {result.dtype}")

    def _accept(self, index: int, value):
        param, expected = self._params[index], self._param_dtypes[index]
        if dtypes.is_scalar(param.dtype):
            convert = {"pybool": bool, "pyint": int, "pyfloat": float}[param.dtype]
            return convert(value)
        if not hasattr(value, "shape"):
            return self.xp.asarray(value, dtype=expected)
        if value.dtype != expected:
            raise InputError(
                f"input {index} of expression {self.fn.name} has dtype {value.dtype}; it was compiled for {param.dtype}"
            )
        return value

    def _result_value(self, result, regs):
        if isinstance(result, Const):
            if dtypes.is_scalar(result.dtype):
                return result.value
            return self.xp.asarray(result.value, dtype=_xp_dtype(self.xp, result.dtype))
        value = regs[result]
        if result < len(self._params) and hasattr(value, "shape"):
            return self.xp.asarray(value, copy=True)  # never hand out the caller's input as our result
        return value

    def buffers_per_call(self, *shapes: Sequence[int]) -> int:
        """How many buffers a call with inputs of these shapes allocates (for tests and tools)."""
        uniform = len({tuple(s) for s in shapes}) <= 1
        return self.uniform_buffers if uniform else self.general_buffers

    def __repr__(self) -> str:
        return f"<compiled elementwise on {getattr(self.xp, '__name__', self.xp)}>\n{print_ir(self.fn)}"


@dataclass(frozen=True)
class _Plan:
    """The step table for one shape case, and the (shape key, dtype) of each buffer slot."""

    steps: tuple[tuple, ...]
    slot_shape_keys: tuple
    slot_dtypes: tuple

    def shape(self, slot: int, regs: list, common_shape: tuple) -> tuple[int, ...]:
        shape_key = self.slot_shape_keys[slot]
        if shape_key == _ALL_INPUTS:
            return common_shape
        return broadcast_shapes(*((i, tuple(regs[i].shape)) for i in sorted(shape_key)))


def broadcast_shapes(*indexed_shapes: tuple[int, tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcasting of (input number, shape) pairs, with an error that names the inputs."""
    result: list[int] = []
    owners: list[int] = []
    for index, shape in indexed_shapes:
        padding = len(shape) - len(result)
        if padding > 0:
            result[:0] = [1] * padding
            owners[:0] = [index] * padding
        for position, size in enumerate(shape, start=len(result) - len(shape)):
            if size == result[position] or size == 1:
                continue
            if result[position] != 1:
                raise ShapeError(
                    f"inputs {owners[position]} and {index} cannot be broadcast together: "
                    f"size {result[position]} vs {size} in dimension {position - len(result)}"
                )
            result[position], owners[position] = size, index
    return tuple(result)


def _dtype_of(operand: int | Const, compiled: CompiledExpression) -> str:
    if isinstance(operand, Const):
        return operand.dtype
    if operand < len(compiled._params):
        return compiled._params[operand].dtype
    return compiled._instructions[operand - len(compiled._params)].value.dtype


def _dim_size(tensor, axis: int, register: int) -> int:
    ndim = len(tensor.shape)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"size(@{register},{axis}): input {register} has {ndim} dimension(s)")
    return int(tensor.shape[axis])


def _assigned(fn: Function, result: Var) -> IRExpr:
    for stmt in fn.body.stmts:
        if isinstance(stmt, Assign) and stmt.target == result:
            return stmt.value
    raise ValueError(f"result {result.name} is never assigned")


def _xp_dtype(xp, dtype: str):
    if dtype == dtypes.SHAPE:
        return None
    return dtypes.array_dtype(xp, dtypes.storage_dtype(dtype))
