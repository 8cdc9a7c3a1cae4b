"""Fused elementwise math on every core: IR Function -> program for elementwise_kernels.

``compile_elementwise`` (the primitive of that name on NumPy-array backends when numba
is on; see ``kuiper_add_primitives``) returns a callable that runs the program in the
compiled interpreter when a call fits it and the NumPy evaluation
(kuiper.ir.codegen_numpy) otherwise, so every call has an answer and both paths
compute the same IR.

A call fits when the function is float32 throughout (bools allowed in between, as
0/1), it has one float32 result, every input is a float32 array, the full-size
inputs share one shape (at most ``PROGRAM_INPUTS`` of them; strided ones are copied), the other
inputs hold one element (read as constants), and the output has at least
``MIN_ELEMENTS`` elements: below that, NumPy's few tiny passes cost less than
preparing the call.  A short program of cheap steps (``CHEAP_CODES``, at most
``CHEAP_STEPS``: a residual add, a ReLU, a box decode) needs ``PARALLEL_WORK``
elements: NumPy runs each such step in one SIMD pass, faster than the interpreter.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from ..ir.codegen_numpy import compile_elementwise as compile_numpy
from ..ir.linearize import linearize
from ..onednn import primitives as onednn_primitives
from ..ir.nodes import Binary, Call, Cast, Compare, Const, Function, Select, Unary, Var
from . import kernel_codes as codes
from .runtime import PARALLEL_WORK, KernelModule, launch_width

vm = KernelModule("elementwise_kernels")

MIN_ELEMENTS = 1024
# A short program of cheap steps (arithmetic, comparisons, selects: no exp, erf, tanh, pow, ...)
# stays on NumPy below the parallel line: NumPy runs each such step as one SIMD pass, faster per
# element than the interpreter's loop (add + ReLU on 0.8 M floats: 0.40 ms against 0.78; a
# 3-step box decode 0.32 against 0.85), with the same IEEE bits.  Above it the interpreter's
# parallel loop catches up (docs/performance.md).  A model whose only compiled work would be
# such programs (ViT's position-embedding add, YOLO's box decode) never imports numba: about
# 0.5 s and 100 MiB of its start-up.
CHEAP_CODES = frozenset((codes.NEG, codes.ABS, codes.FLOOR, codes.CEIL, codes.TRUNC, codes.NOT, codes.TO_BOOL,
                         codes.COPY, codes.ADD, codes.SUB, codes.MUL, codes.DIV, codes.MAX, codes.MIN, codes.GT,
                         codes.GE, codes.LT, codes.LE, codes.EQ, codes.NE, codes.SELECT, codes.MULADD))
CHEAP_STEPS = 3  # NumPy passes: a MULADD is two
# Below MIN_ELEMENTS, a program of at least this many NumPy passes runs in the interpreter all the same
# (``CompiledElementwise._small_call``); one pass stays NumPy's single ufunc call.
SMALL_PASSES = 2
VALUE_DTYPES = ("float32", "bool")

_UNARY = {"neg": codes.NEG, "not": codes.NOT}
_CALLS = {"abs": codes.ABS, "sqrt": codes.SQRT, "exp": codes.EXP, "expm1": codes.EXPM1, "log": codes.LOG, "log1p": codes.LOG1P,
          "tanh": codes.TANH, "erf": codes.ERF, "floor": codes.FLOOR, "ceil": codes.CEIL, "trunc": codes.TRUNC,
          "sin": codes.SIN, "cos": codes.COS}
_BINARY = {"add": codes.ADD, "sub": codes.SUB, "mul": codes.MUL, "div": codes.DIV, "pow": codes.POW, "max": codes.MAX, "min": codes.MIN}
_COMPARE = {"gt": codes.GT, "ge": codes.GE, "lt": codes.LT, "le": codes.LE, "eq": codes.EQ, "ne": codes.NE}


class Unsupported(Exception):
    """The function uses something the interpreter does not run (it stays on NumPy)."""


class Program:
    """A Function lowered to the interpreter's code table, registers reused after their last use."""

    def __init__(self, function: Function):
        fn = linearize(function)
        if len(fn.results) != 1 or fn.returns_list or fn.results[0].dtype != "float32":
            raise Unsupported("one float32 result")
        if any(p.dtype != "float32" for p in fn.params):
            raise Unsupported("float32 inputs only")
        self.param_count = len(fn.params)
        statements = [s for s in fn.body.stmts if s.target not in fn.results]
        result_value = next(s.value for s in fn.body.stmts if s.target == fn.results[0])
        steps = _multiplies_added([(s.target, *self._operation(s.value)) for s in statements], result_value)
        self._last_use = self._last_uses(steps, result_value)
        self._free: list[int] = []
        self.registers = 0
        self.constants: list[tuple[int, float]] = []  # (register, value), filled once per block
        self._constant_register: dict[bytes, int] = {}  # by bit pattern, so NaN is one constant
        self._params = set(fn.params)
        self._value_register: dict[Var, int] = {}
        rows: list[tuple[int, int, int, int, int]] = []
        self._input_registers: list[int] = []  # one per param, in order; loaded or filled per call
        self._tables: dict[tuple[bool, ...], tuple] = {}  # by which inputs hold one element
        for param in fn.params:
            register = self._allocate()
            self._value_register[param] = register
            self._input_registers.append(register)
        for index, (target, opcode, operands) in enumerate(steps):
            sources = [self._operand(operand) for operand in operands]
            # The destination is never an operand's register: LLVM vectorises a loop only after
            # its runtime check finds the rows disjoint; in place, max/select ran as scalar
            # branches (6 ns an element instead of 0.2).
            dest = self._allocate()
            self._release_dead(operands, index)
            self._value_register[target] = dest
            rows.append((opcode, dest, *(sources + [0, 0, 0])[:3]))
        rows.append((codes.STORE, 0, self._operand(result_value), 0, 0))
        self.body = rows
        # Element operations per element (each input's load one more): what decides the parallel launch.
        self.cost = self.param_count + sum(codes.STEP_COST.get(row[0], 1) for row in rows)

    @staticmethod
    def _last_uses(steps, result_value) -> dict[Var, int]:
        last: dict[Var, int] = {}
        for index, (_, _, operands) in enumerate(steps):
            for operand in operands:
                if isinstance(operand, Var):
                    last[operand] = index
        if isinstance(result_value, Var):
            last[result_value] = len(steps)
        return last

    def _operation(self, value) -> tuple[int, tuple]:
        if value.dtype not in VALUE_DTYPES:
            raise Unsupported(f"dtype {value.dtype}")
        if isinstance(value, Unary) and value.op in _UNARY:
            return _UNARY[value.op], (value.operand,)
        if isinstance(value, Call) and value.func in _CALLS:
            return _CALLS[value.func], value.args
        if isinstance(value, Binary) and value.op in _BINARY:
            return _BINARY[value.op], (value.lhs, value.rhs)
        if isinstance(value, Compare) and value.op in _COMPARE and value.lhs.dtype == "float32":
            return _COMPARE[value.op], (value.lhs, value.rhs)
        if isinstance(value, Select):
            return codes.SELECT, (value.cond, value.true_value, value.false_value)
        if isinstance(value, Cast) and value.operand.dtype in VALUE_DTYPES:
            return (codes.TO_BOOL if value.dtype == "bool" else codes.COPY), (value.operand,)
        raise Unsupported(type(value).__name__)

    def _operand(self, operand) -> int:
        if isinstance(operand, Var):
            return self._value_register[operand]
        if isinstance(operand, Const) and operand.dtype in VALUE_DTYPES:
            value = np.float32(operand.value)
            key = value.tobytes()
            if key not in self._constant_register:
                register = self._allocate(pinned=True)
                self._constant_register[key] = register
                self.constants.append((register, float(value)))
            return self._constant_register[key]
        raise Unsupported(f"operand {operand}")

    def _release_dead(self, operands, index: int) -> None:
        for operand in {o for o in operands if isinstance(o, Var)}:
            # Parameter registers are never reused: a one-element input is filled once per block.
            if operand not in self._params and self._last_use.get(operand) == index:
                self._free.append(self._value_register[operand])

    def _allocate(self, pinned: bool = False) -> int:
        if self._free and not pinned:
            return self._free.pop()
        self.registers += 1
        return self.registers - 1

    def arguments(self, inputs, memory_order: bool = False):
        """(shape, code, constant registers, constant values, slots, order) for these inputs, or None if
        they do not fit.  The tables depend only on which inputs hold one element, and are made
        once per such pattern.

        ``order`` is None when the slots are the inputs in C order.  With ``memory_order``, full-size
        inputs that share one dense but permuted layout (a transposed view: a permute before GELU)
        stream in memory order instead, without a copy: ``order`` is the axis permutation that
        makes them C-contiguous, and the result must be laid out the same way.
        """
        full_shape = None
        constant_rank = 0
        full: list[np.ndarray] = []
        one_element: list[float] = []
        for value in inputs:
            if not isinstance(value, np.ndarray) or value.dtype != np.float32:
                return None
            if value.size == 1:
                one_element.append(float(value.reshape(())))
                constant_rank = max(constant_rank, value.ndim)
                continue
            if full_shape is not None and value.shape != full_shape:
                return None
            full_shape = value.shape
            full.append(value)
        # A one-element input of higher rank would add leading dims to the result: NumPy's job.
        if full_shape is None or len(full) > codes.PROGRAM_INPUTS or constant_rank > len(full_shape):
            return None
        # A broadcast input (a bias or a statistic repeated along some dims: a stride of 0) streams only
        # as a copy, one pass of its own.  NumPy reads it where it lies: where its passes over the
        # program are no more than those copies and two, NumPy is faster (a batch norm + ReLU over a
        # transposed 64 x 112 x 112 activation, three broadcasts: 2.4 ms with the copies, 0.5 in NumPy).
        repeated = sum(1 for value in full if any(stride == 0 and size > 1
                                                  for stride, size in zip(value.strides, value.shape)))
        if repeated and self.passes <= repeated + 2:
            return None
        order = dense_order(full) if memory_order else None
        if order is None:
            # A strided input (a permuted view) is copied: one pass, where NumPy's evaluation of
            # the same program on the strided view makes several (GELU: 40 ms against 4).
            slots = [np.ascontiguousarray(value).reshape(-1) for value in full]
        else:
            slots = [np.transpose(value, order).reshape(-1) for value in full]  # views
        code, constant_registers, constant_values = self.tables(tuple(value.size == 1 for value in inputs))
        if one_element:
            constant_values = constant_values.copy()
            constant_values[len(self.constants):] = one_element
        return full_shape, code, constant_registers, constant_values, slots, order

    @property
    def passes(self) -> int:
        """How many whole-array passes NumPy makes over this program (a MULADD is two; the STORE none)."""
        return sum(2 if row[0] == codes.MULADD else 1 for row in self.body[:-1])

    def is_cheap(self) -> bool:
        """Whether the program is at most CHEAP_STEPS NumPy passes, each in CHEAP_CODES (its last row is STORE)."""
        return self.passes <= CHEAP_STEPS and all(row[0] in CHEAP_CODES for row in self.body[:-1])

    def tables(self, pattern: tuple[bool, ...]):
        """(code, constant registers, constant values) when the inputs flagged in ``pattern`` hold one
        element (their values go at the end of the constant values) and the others stream from the
        input slots, in order."""
        tables = self._tables.get(pattern)
        if tables is None:
            tables = self._tables[pattern] = self._make_tables(pattern)
        return tables

    def _make_tables(self, pattern: tuple[bool, ...]):
        loads, input_registers = [], []
        for register, is_constant in zip(self._input_registers, pattern):
            if is_constant:
                input_registers.append(register)
            else:
                loads.append((codes.LOAD, register, len(loads), 0, 0))
        constant = {r for r, _ in self.constants} | set(input_registers)
        rows = loads + [_marking_constants(row, constant) for row in self.body]
        code = np.array(rows, dtype=np.int64)
        # A constant that no step streams needs its value once, not a whole register of it
        # (filling them was a quarter of a long program's call on two threads).
        streamed = _streamed_registers(rows)
        registers = [r if r in streamed else -1 - r for r in [r for r, _ in self.constants] + input_registers]
        values = [v for _, v in self.constants] + [0.0] * len(input_registers)  # inputs' values per call
        return code, np.array(registers, dtype=np.int64), np.array(values, dtype=np.float32)


def _multiplies_added(steps: list[tuple], result_value) -> list[tuple]:
    """``steps`` (target, opcode, operands) with each add of a product read nowhere else made one
    MULADD step: a polynomial's Horner steps (XLA's erf has 20) are then one pass over the registers
    each, not two.  The product is still rounded before the add, so the bits do not change."""
    uses: dict[Var, int] = {}
    for _, _, operands in steps:
        for operand in operands:
            if isinstance(operand, Var):
                uses[operand] = uses.get(operand, 0) + 1
    if isinstance(result_value, Var):
        uses[result_value] = uses.get(result_value, 0) + 1
    product = {target: operands for target, opcode, operands in steps if opcode == codes.MUL}
    taken: set[Var] = set()
    merged = []
    for target, opcode, operands in steps:
        if opcode == codes.ADD:
            for side in (0, 1):
                term = operands[side]
                if term in product and uses[term] == 1:
                    taken.add(term)
                    opcode, operands = codes.MULADD, (*product[term], operands[1 - side])
                    break
        merged.append((target, opcode, operands))
    return [step for step in merged if step[0] not in taken]


def _streamed_registers(rows: list[tuple]) -> set[int]:
    """The registers some row reads element by element (operands below 0 are constants read once)."""
    streamed: set[int] = set()
    for op, _, a, b, c in rows:
        if op == codes.LOAD:
            continue
        if op in (codes.SELECT, codes.MULADD):
            operands = (a, b, c)
        elif codes.ADD <= op < codes.SELECT:
            operands = (a, b)
        else:  # one operand: STORE, the functions
            operands = (a,)
        streamed.update(r for r in operands if r >= 0)
    return streamed


# Operands that may trade places: a + b is b + a, a < b is b > a, bit for bit.
_SWAPPED = {codes.ADD: codes.ADD, codes.MUL: codes.MUL, codes.EQ: codes.EQ, codes.NE: codes.NE,
            codes.GT: codes.LT, codes.LT: codes.GT, codes.GE: codes.LE, codes.LE: codes.GE}


def _marking_constants(row: tuple, constant: set[int]) -> tuple:
    """A binary or MULADD row with each operand register that holds one constant value written as
    -1 - r (read once), a constant moved right where the step allows; two constants stay registers."""
    op, dest, a, b, c = row
    if op == codes.MULADD:
        if a in constant and b not in constant:
            a, b = b, a
        return op, dest, a, _marked(b, constant), _marked(c, constant)
    if not codes.ADD <= op < codes.SELECT or (a in constant) == (b in constant):
        return row
    if a in constant and op in _SWAPPED:
        op, a, b = _SWAPPED[op], b, a
    return op, dest, _marked(a, constant), _marked(b, constant), c


def _marked(register: int, constant: set[int]) -> int:
    return -1 - register if register in constant else register


class CompiledElementwise:
    """``f(*inputs, out=None)``: the interpreter for the calls that fit, NumPy for the rest."""

    def __init__(self, function: Function):
        self.numpy_path = compile_numpy(function, np)
        self.fn = self.numpy_path.fn
        try:
            self.program = Program(function)
            self.reason = "compiled"
        except Unsupported as exc:
            self.program = None
            self.reason = f"NumPy: {exc}"
        self.min_elements = PARALLEL_WORK if self.program is not None and self.program.is_cheap() else MIN_ELEMENTS
        # Calls below MIN_ELEMENTS cost what their Python costs: NumPy pays a step table walk and a
        # ufunc per pass (an LSTM cell's gates, 17 passes on 1 x 128: 20 us), the interpreter one
        # dispatch for the whole program (3-4 us), once the inputs need no preparing (``_small_call``).
        self.small_calls = (self.program is not None and self.program.passes >= SMALL_PASSES
                            and self.program.param_count <= codes.PROGRAM_INPUTS)
        self.last_path = None  # "numpy", "serial" or "parallel": which path the latest call took (tests, notes)

    def __call__(self, *inputs, out=None):
        # A call fits only if its output, the shape of its largest input, has MIN_ELEMENTS: smaller
        # calls go straight to NumPy, without preparing the interpreter's arguments, or, for a program
        # of several passes whose inputs are float32 arrays of one shape, to the interpreter as they are.
        fits = None
        if self.program is not None and len(inputs) == self.program.param_count:
            largest = 0
            for value in inputs:  # a loop: max() over a generator cost 1.5 us of a small add's 5
                size = getattr(value, "size", 0)
                largest = size if size > largest else largest
            if largest >= self.min_elements:
                fits = self.program.arguments(inputs, memory_order=out is None)
            elif largest < MIN_ELEMENTS and self.small_calls and _one_shape(inputs) is not None:
                self.last_path = "serial"
                return self._small_call(inputs, out)
        if fits is None or fits[4][0].size < MIN_ELEMENTS:
            self.last_path = "numpy"
            return self.numpy_path(*inputs, out=out)
        shape, code, constant_registers, constant_values, slots, order = fits
        if order is not None:
            # The inputs' own layout: the result is a permuted view of a dense buffer, as they are.
            dense = output_array(tuple(shape[axis] for axis in order), np.float32)
            self._run(code, constant_registers, constant_values, slots, dense.reshape(-1))
            return np.transpose(dense, np.argsort(order))
        if out is None or out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
            result = output_array(shape, np.float32)
        else:
            result = out
        self._run(code, constant_registers, constant_values, slots, result.reshape(-1))
        if out is not None and result is not out:
            out[...] = result
            return out
        return result

    def _small_call(self, inputs, out):
        """The interpreter on one thread over inputs that are float32 arrays of one shape (``_one_shape``),
        read flat (by ``run_small``: a view, or a copy of a strided one), without ``Program.arguments``."""
        code, constant_registers, constant_values = self.program.tables((False,) * len(inputs))
        padded = list(inputs) + [inputs[0]] * (codes.PROGRAM_INPUTS - len(inputs))  # slots it never loads
        result = output_array(inputs[0].shape, np.float32)
        vm.run_small.serial(code, constant_registers, constant_values, self.program.registers, *padded, result)
        if out is not None:
            out[...] = result
            return out
        return result

    def specialized(self, inputs, fallback):
        """A specialized forward (``Op.specialized``) for calls like this one when it takes the small
        interpreter path: ``_small_call`` with its tables fetched once and the checks that choose it
        written out (class, dtype and the sample's shape, each an identity or tuple test); ``fallback``
        for any other inputs.  None where this call would not take that path."""
        if not (self.small_calls and len(inputs) == self.program.param_count and _one_shape(inputs) is not None
                and inputs[0].size < MIN_ELEMENTS):
            return None
        shape, count = inputs[0].shape, len(inputs)
        code, constant_registers, constant_values = self.program.tables((False,) * count)
        registers, run, array, float32, empty = self.program.registers, vm.run_small.serial, np.ndarray, \
            inputs[0].dtype, output_array
        # The slots after the program's inputs, which it never loads, hold one array of the inputs' shape
        # made here, not a list made per call.
        unread = (np.zeros(shape, np.float32),) * (codes.PROGRAM_INPUTS - count)

        def small(*xs):
            # Class and dtype here (numba would take a subclass, and compile anew for another dtype); the
            # shapes, and the flat views, in the kernel (False: a shape differs, nothing written).
            if len(xs) == count:
                for x in xs:
                    if x.__class__ is not array or x.dtype is not float32:
                        return fallback(*xs)
                result = empty(shape, float32)
                if run(code, constant_registers, constant_values, registers, *xs, *unread, result):
                    return result
            return fallback(*xs)

        return small

    def direct(self, inputs):
        """(a function computing this expression from inputs of ``inputs``' classes and dtypes, the input
        size below which it applies) for a specialized forward: NumPy's path, which every call with
        fewer elements than ``min_elements`` takes (kuiper.ir.codegen_numpy's ``direct``); None where
        these inputs would not take it."""
        if self.program is not None and any(getattr(value, "size", 0) >= self.min_elements for value in inputs):
            return None
        if self.small_calls and _one_shape(inputs) is not None:
            return None  # the interpreter's small path (``specialized``), not NumPy's
        direct = self.numpy_path.direct(inputs)
        if direct is None:
            return None
        return direct[0], (self.min_elements if self.program is not None else None)

    def _run(self, code, constant_registers, constant_values, slots, flat_out):
        size = flat_out.size
        padded = slots + [slots[0]] * (codes.PROGRAM_INPUTS - len(slots))
        count = launch_width(size * self.program.cost)
        parallel = count > 1
        self.last_path = "parallel" if parallel else "serial"
        # On the calling thread, one block: the same operations on every element as in the parallel
        # version's blocks.
        blocks = min(-(-size // codes.CHUNK), 4 * count) if parallel else 1
        vm.run_program.launch(parallel, code, constant_registers, constant_values, self.program.registers, blocks,
                              *padded, flat_out)


def _one_shape(inputs) -> tuple | None:
    """The inputs' one shape when every input is a float32 NumPy array (exactly) of it; else None."""
    shape = None
    for value in inputs:
        if value.__class__ is not np.ndarray or value.dtype != np.float32:
            return None
        if shape is None:
            shape = value.shape
        elif value.shape != shape:
            return None
    return shape


def dense_order(arrays: list[np.ndarray]) -> tuple[int, ...] | None:
    """The axis order in which the arrays, which share one shape, all lie densely in memory (their
    strides sorted from largest), if it is not C order and they share it; else None."""
    first = arrays[0]
    if first.flags.c_contiguous or any(value.strides != first.strides for value in arrays[1:]):
        return None
    return onednn_primitives.dense_order(first)


def compile_elementwise(default, function: Function) -> CompiledElementwise:
    """The ``compile_elementwise`` primitive of NumPy-array backends (``kuiper_add_primitives``).

    ``default`` (the backend's own) is not needed: a CompiledElementwise carries its NumPy path.
    """
    return CompiledElementwise(function)
