"""The execution plan of a Model: its steps as flat tuples, run in one tight loop.

A small model spends its time between ops, not in them: building an argument list,
checking for an observer, unpacking outputs, at every node of every call.  The plan
decides all of that once, when the Model is made: each step becomes a tuple of the op,
how many inputs it takes and from which value slots, where its output goes (one slot,
or several for a multi-output op), and which slots die after it.  A call is then one
loop over those tuples (``run``); running with a StepObserver takes a second, plainer
loop (``run_observed``) so the common case pays nothing for it.

The first call also specializes: after each step it asks the op for a faster forward
for inputs like the ones it just saw (``Op.specialized``: the ufunc itself for a small
add, a reshape to the shape resolved once), and later calls run those.  A small op spent
4-8 us deciding again, at every call, what its first call had decided (the dtypes'
compiled function, whether the interpreter pays, where a -1 goes); ONNX Runtime pays
0.25-2 us per op.  A specialized forward checks what it assumed with identity tests and
falls back to ``forward`` where they fail, so it is never wrong, only sometimes not faster.
``KUIPER_SPECIALIZE=0`` (read when a model is built) keeps every step on ``forward``, to
compare or to rule the specialized forwards out.  An op whose ``forward`` was replaced on the
instance (tests, tracing tools) is not specialized, and replacing one after the first call
makes the next call specialize anew, so the wrapper always runs.  Whatever fails inside an op
leaves with the op's name: a KuiperError gets the op named in front, any other exception
becomes an OpExecutionError with the input shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import output_buffers
from ..backends.base import NUMPY_ARRAYS
from ..config import switch_from_env
from ..errors import KuiperError
from ..model_ir import OpNode
from ..ops.base import Op
from .memory_plan import SWITCH_ENV as MEMORY_PLAN_ENV
from .memory_plan import MemoryPlan, Recorder


@dataclass
class Step:
    op: Any
    node: OpNode
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    free_slots: tuple[int, ...]


class OpExecutionError(KuiperError):
    """An op failed while running; the message names the op and the input shapes it saw."""


class StepObserver:
    """Sees every executed step of ``Model.run(..., observer=...)``; override what you need.

    ``node`` is the graph's OpNode (``node.name``, ``node.type``, ``node.source``);
    ``inputs`` and ``outputs`` are the values as the backend holds them.  Use it
    to time ops (``kuiper bench --profile`` does), trace shapes, or stop at the
    first op whose output holds a NaN.
    """

    def before_step(self, node, inputs) -> None:
        pass

    def after_step(self, node, inputs, outputs) -> None:
        pass


SPECIALIZE_ENV = "KUIPER_SPECIALIZE"
MULTIPLE = -1  # the output slot of a step with several outputs: they are unpacked with a check
MAX_MEMORY_PLANS = 4  # feed shapes whose memory plans a model keeps; more (many batch sizes) start over
_UNRECORDED = object()


class ExecutionPlan:
    """``steps`` as flat tuples, and the loops that run them over a list of value slots."""

    def __init__(self, steps: list[Step], backend, input_slots: Sequence[int] = (), output_slots: Sequence[int] = (),
                 slot_count: int = 0, untyped_input_slots: Sequence[int] = ()):
        self.steps = steps
        self.backend = backend  # translates device failures (out of GPU memory) into KuiperErrors
        self.input_slots, self.output_slots, self.slot_count = tuple(input_slots), tuple(output_slots), slot_count
        # Memory plans by feed shapes and dtypes (kuiper/graph/memory_plan.py; None: the recording found
        # nothing to plan), for a model's own calls on NumPy arrays.  A step whose op runs sub-graphs is
        # never offered a buffer: its sub-graphs' ops would take it.
        self.plans_memory = switch_from_env(MEMORY_PLAN_ENV, True) and NUMPY_ARRAYS in backend.capabilities
        self.memory_plans: dict[tuple, MemoryPlan | None] = {}
        self.untyped_input_slots = tuple(untyped_input_slots)  # the slots of feeds whose input declares no dtype
        self._plannable = tuple(not step.op.has_subgraphs for step in steps)
        self.specialize = switch_from_env(SPECIALIZE_ENV, True)
        self.entries: tuple = ()  # the steps with their specialized forwards, once a call has made them
        # Op.forward_replacements when ``entries`` were made (None: not yet): a forward replaced since
        # then makes the next call specialize again, calling the replacement.
        self._specialized_at: int | None = None

    @staticmethod
    def _entry(index: int, step: Step, call) -> tuple:
        """(the callable that runs the step, input count, first input slot, second input slot, all input
        slots, output slot or MULTIPLE, slots to free, step index): the unused slots of one-input ops are
        0, never read."""
        inputs = step.input_slots
        first = inputs[0] if inputs else 0
        second = inputs[1] if len(inputs) > 1 else 0
        output = step.output_slots[0] if len(step.output_slots) == 1 else MULTIPLE
        return call, len(inputs), first, second, inputs, output, step.free_slots, index

    def run(self, slots: list) -> None:
        """Run every step, reading and writing ``slots`` (the feeds already in their slots)."""
        if self._specialized_at != Op.forward_replacements:
            self._run_specializing(slots)
            return
        for call, count, first, second, inputs, output, frees, index in self.entries:
            try:
                if count == 1:
                    result = call(slots[first])
                elif count == 2:
                    result = call(slots[first], slots[second])
                else:
                    result = call(*[slots[i] for i in inputs])
            except Exception as exc:
                self._raise_for(exc, self.steps[index], [slots[i] for i in inputs])
            if output != MULTIPLE:
                slots[output] = result
            else:
                self._unpack(self.steps[index], result, slots)
            for slot in frees:
                slots[slot] = None

    def _run_specializing(self, slots: list) -> None:
        """``run``, asking each op after its step for a specialized forward (``Op.specialized``); the
        entries change only when every step has run."""
        replacements = Op.forward_replacements
        entries = []
        for index, step in enumerate(self.steps):
            op = step.op
            inputs = [slots[i] for i in step.input_slots]
            try:
                result = op.forward(*inputs)
                # (A specialization that fails names the op too, as its forward's failures do.)
                fast = op.specialized(inputs) if self.specialize and "forward" not in vars(op) else None
            except Exception as exc:
                self._raise_for(exc, step, inputs)
            self._unpack(step, result, slots)
            entries.append(self._entry(index, step, op.forward if fast is None else fast))
            del inputs
            for slot in step.free_slots:
                slots[slot] = None
        self.entries = tuple(entries)
        self._specialized_at = replacements

    def run_call(self, slots: list) -> None:
        """``run`` for a model's own call (``Model.__call__``, not a sub-graph's): after the call that
        specializes, one call per feed shapes is recorded and planned, and the calls after it take their
        values' buffers from the plan."""
        if not self.plans_memory or self._specialized_at != Op.forward_replacements:
            self.memory_plans.clear()  # made with forwards since replaced
            self.run(slots)
            return
        state = output_buffers.offer_state()
        if state.busy:  # called from inside an op of another model's planned call: this one runs unplanned
            self.run(slots)
            return
        state.busy = True
        try:
            # The feeds' shapes, and the dtypes of those whose input declares none (the others are converted
            # to theirs, Model._check_feed): 2 us for 40 feeds, where hashing every dtype too cost 6.
            key = tuple([slots[slot].shape for slot in self.input_slots])
            if self.untyped_input_slots:
                key += tuple([slots[slot].dtype for slot in self.untyped_input_slots])
            plan = self.memory_plans.get(key, _UNRECORDED)
            if plan is _UNRECORDED:
                if len(self.memory_plans) >= MAX_MEMORY_PLANS:
                    self.memory_plans.clear()
                self.memory_plans[key] = self._run_recording(slots)
            elif plan is None:
                self.run(slots)
            else:
                self._run_offering(slots, plan)
        finally:
            state.busy, state.buffers, state.recorded = False, None, None

    def _run_recording(self, slots: list) -> MemoryPlan | None:
        """``run``, recording what the memory plan needs (``Recorder``); the plan it makes."""
        recorder = Recorder(self.slot_count, len(self.steps))
        for call, count, first, second, inputs, output, frees, index in self.entries:
            values = [slots[i] for i in inputs]
            output_buffers.start_recording()
            try:
                result = call(*values)
            except Exception as exc:
                self._raise_for(exc, self.steps[index], values)
            finally:
                requested = output_buffers.stop_recording()
            step = self.steps[index]
            outputs = self._unpack(step, result, slots)
            recorder.after_step(index, step.input_slots, step.output_slots, values, outputs, requested,
                                self._plannable[index])
            del values, requested
            for slot in frees:
                slots[slot] = None
        plan = recorder.finish(self.output_slots)
        if plan is not None:
            plan.offers()  # this thread's arena now, once the call's values are freed: the next call is steady
        return plan

    def _run_offering(self, slots: list, plan: MemoryPlan) -> None:
        """``run``, offering each planned step its buffers (``kuiper.output_buffers.output_array``).  An output
        that still lies in the arena afterwards (an op whose aliasing changed with its inputs' values) is
        copied out: the next call overwrites the arena.  ``run``'s loop with the offers, written apart so that
        a loop body's iterations (``run``, never planned) pay nothing for them."""
        offers = plan.offers()
        state = output_buffers.offer_state()
        for call, count, first, second, inputs, output, frees, index in self.entries:
            offered = offers[index]
            if offered is not None:
                state.buffers, state.position = offered, 0
            try:
                if count == 1:
                    result = call(slots[first])
                elif count == 2:
                    result = call(slots[first], slots[second])
                else:
                    result = call(*[slots[i] for i in inputs])
            except Exception as exc:
                state.buffers = None
                self._raise_for(exc, self.steps[index], [slots[i] for i in inputs])
            if offered is not None:
                state.buffers = None
            if output != MULTIPLE:
                slots[output] = result
            else:
                self._unpack(self.steps[index], result, slots)
            for slot in frees:
                slots[slot] = None
        for slot in self.output_slots:
            if plan.holds(slots[slot]):
                slots[slot] = slots[slot].copy()

    def state_step(self, input_slots: Sequence[int], output_slots: Sequence[int], slot_count: int) -> Callable:
        """``step(values) -> outputs``: ``run`` as a loop calls its body or condition at every iteration but
        the first, with values a plan made (taken as they are, as ``Model.call_within(checked=False)``
        takes them).  An output that is an input comes back as given, and where the inputs do not lie in
        the first slots in order, only those some step reads go into slots: a Flax LSTM's loop carries
        twenty values, its body reads eight of them and returns sixteen untouched, and its condition reads
        one; moving all of them in and out of slots one by one cost 3 us an iteration."""
        read = {slot for step in self.steps for slot in step.input_slots}
        feeds = tuple((position, slot) for position, slot in enumerate(input_slots) if slot in read)
        position_of = {slot: position for position, slot in enumerate(input_slots)}
        count = len(output_slots)
        kept = tuple(position_of.get(slot) == j for j, slot in enumerate(output_slots))
        moved = tuple((j, position_of[slot]) for j, slot in enumerate(output_slots)
                      if slot in position_of and not kept[j])
        computed = tuple((j, slot) for j, slot in enumerate(output_slots) if slot not in position_of)
        plan = self
        # The inputs hold the first slots in order (as a Model lays them out): then all of them go in with
        # one copy of the list, the unread ones too (``values`` holds them anyway), where a loop over the
        # read ones cost 0.5 us of a Flax LSTM's iteration.
        in_order, size = tuple(input_slots) == tuple(range(len(input_slots))), len(input_slots)
        free_slots = (None,) * (slot_count - size)

        def step(values):
            if in_order and len(values) == size:
                slots = [*values, *free_slots]
            else:
                slots = [None] * slot_count
                for position, slot in feeds:
                    slots[slot] = values[position]
            plan.run(slots)  # looked up at each call, as Model.call_within does (a tool may wrap it)
            # Outputs that are the same input at the same position are copied along with the list.
            results = list(values[:count]) if len(values) >= count else [*values, *([None] * (count - len(values)))]
            for j, position in moved:
                results[j] = values[position]
            for j, slot in computed:
                results[j] = slots[slot]
            return results

        return step

    def specialized_count(self) -> int:
        """How many steps run a specialized forward (0 before the first call, or with KUIPER_SPECIALIZE=0)."""
        return sum(getattr(entry[0], "__self__", None) is not step.op for entry, step in zip(self.entries, self.steps))

    def run_observed(self, slots: list, observer: StepObserver) -> None:
        """``run``, telling ``observer`` before and after each step."""
        specialized = self._specialized_at == Op.forward_replacements
        for index, step in enumerate(self.steps):
            inputs = [slots[i] for i in step.input_slots]
            observer.before_step(step.node, inputs)
            # The specialized forwards, once made, so that a profile times what a plain call runs.
            call = self.entries[index][0] if specialized else step.op.forward
            try:
                result = call(*inputs)
            except Exception as exc:
                self._raise_for(exc, step, inputs)
            outputs = self._unpack(step, result, slots)
            observer.after_step(step.node, inputs, outputs)
            del inputs
            for slot in step.free_slots:
                slots[slot] = None

    @staticmethod
    def _unpack(step: Step, result, slots: list) -> tuple:
        """Store ``result`` in the step's output slots; the outputs as a tuple."""
        if len(step.output_slots) == 1:
            slots[step.output_slots[0]] = result
            return (result,)
        if not isinstance(result, (tuple, list)) or len(result) != len(step.output_slots):
            raise OpExecutionError(
                f"{step.node.describe()} returned {_count(result)} value(s) for {len(step.output_slots)} outputs"
            )
        for slot, value in zip(step.output_slots, result):
            slots[slot] = value
        return tuple(result)

    def _raise_for(self, exc: Exception, step: Step, inputs: list) -> None:
        """Raise what ``exc``, raised by ``step``'s op, becomes (``_failure``): itself, or a translation of it."""
        failure = self._failure(exc, step, inputs)
        if failure is exc:
            raise exc
        raise failure from exc

    def _failure(self, exc: Exception, step: Step, inputs: list) -> Exception:
        """The error to raise for ``exc`` from ``step``: it names the op (or is the backend's device error);
        ``exc`` itself when it names the op already."""
        if isinstance(exc, KuiperError):
            return _naming_the_op(exc, step)
        translated = self.backend.device_error(exc)
        if translated is not None:
            return translated
        shapes = ", ".join(_describe_value(value) for value in inputs)
        reason = "out of memory" if isinstance(exc, MemoryError) else f"{type(exc).__name__}: {exc}"
        return OpExecutionError(f"{step.node.describe()} failed on inputs [{shapes}]: {reason}")


def _describe_value(value) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{tuple(shape)} {getattr(value, 'dtype', '')}".strip()
    return repr(value)


def _naming_the_op(exc: KuiperError, step: Step) -> KuiperError:
    """The same error, with the op named in front when the message does not name it yet."""
    if f"'{step.node.name}'" in str(exc):
        return exc
    try:
        return type(exc)(f"{step.node.describe()}: {exc}")
    except TypeError:  # an error class with a constructor of its own
        return exc


def _count(result) -> int:
    return len(result) if isinstance(result, (tuple, list)) else 1
