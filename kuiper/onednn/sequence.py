"""A fixed sequence of oneDNN primitive calls over buffers planned once: a run of layers as a flat loop
of native calls.

A model's convolutions call oneDNN one op at a time, and each op's Python around its call (its
checks, its argument table, a fresh output) cost 15-50 us in a model, where ONNX Runtime's
kernels follow one another at a few.  A ``Sequence`` is built once for inputs of one kind: every
primitive the run executes, in order, with its memory objects pointed at buffers planned from
the values' lifetimes (a buffer is reused once the value in it is dead), so a call re-points only
the inputs and the fresh outputs and then executes the primitives one after another.  Nothing
else is allocated; the same calls run every time (what a CUDA graph would capture on a GPU).

``SequenceBuilder`` collects the steps (``input``, ``run``, ``starting_as``) and ``build`` plans
the buffers.  A sum post-op's output starts as a copy of the residual it adds to: where nothing
reads the residual afterwards, the output takes over the residual's buffer and no copy is made.
Each thread gets its own buffers and memory objects on its first call, so one sequence may run
in several threads at once.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_SCRATCHPAD, ExecArg, Library
from .primitives import Layout, Primitive, _Memories, address

INPUT, INTERNAL, OUTPUT = "input", "internal", "output"


@dataclass
class _Run:
    primitive: Primitive
    constants: dict  # {argument number: (layout, array)}, the same arrays every call
    values: dict  # {argument number: value index}
    threads: int


@dataclass
class _StartAs:
    value: int  # a value whose buffer starts as a copy of
    source: int  # this one's


class SequenceBuilder:
    """Collects a sequence's steps over numbered values; ``build`` plans their buffers."""

    def __init__(self, library: Library):
        self.library = library
        self.layouts: list[Layout | None] = []  # None: an input's, which the caller brings
        self.kinds: list[str] = []
        self.steps: list = []

    def input(self) -> int:
        """A value each call passes in (a buffer in the layout its readers read)."""
        return self._value(None, INPUT)

    def value(self, layout: Layout) -> int:
        """A value a step writes: a planned buffer, or a fresh output if ``build`` names it."""
        return self._value(layout, INTERNAL)

    def starting_as(self, layout: Layout, source: int) -> int:
        """A value whose buffer holds a copy of ``source`` before the step that writes it runs (a sum post-op adds
        what the output buffer holds)."""
        value = self.value(layout)
        self.steps.append(_StartAs(value, source))
        return value

    def run(self, primitive: Primitive, constants: dict, values: dict[int, int], threads: int) -> None:
        """Execute ``primitive`` with its ``constants`` and the values by argument number, on ``threads``."""
        self.steps.append(_Run(primitive, dict(constants), dict(values), threads))

    def _value(self, layout: Layout | None, kind: str) -> int:
        self.layouts.append(layout)
        self.kinds.append(kind)
        return len(self.layouts) - 1

    def build(self, outputs: list[int]) -> Sequence:
        """The sequence returning ``outputs`` (fresh arrays each call; every other written value lives in a
        planned buffer)."""
        kinds = list(self.kinds)
        for value in outputs:
            kinds[value] = OUTPUT
        last_read = {}
        for index, step in enumerate(self.steps):
            reads = [step.source] if isinstance(step, _StartAs) else step.values.values()
            for value in reads:
                last_read[value] = index
        for value in outputs:
            last_read[value] = len(self.steps)  # the caller reads them
        for index, step in enumerate(self.steps):  # a value nobody reads is dead once written
            for value in ([step.value] if isinstance(step, _StartAs) else step.values.values()):
                last_read.setdefault(value, index)
        buffer_of: dict[int, int] = {}  # value -> planned buffer
        sizes: list[int] = []  # bytes of each planned buffer
        free: list[int] = []
        handed_over: set[int] = set()  # residuals whose buffers a sum's output took over
        steps = []
        for index, step in enumerate(self.steps):
            if isinstance(step, _StartAs):
                taken = (kinds[step.value] == INTERNAL and kinds[step.source] == INTERNAL
                         and last_read[step.source] == index
                         and sizes[buffer_of[step.source]] >= self.layouts[step.value].nbytes)
                if taken:  # the residual is dead once copied: its buffer becomes the output's, as it is
                    buffer_of[step.value] = buffer_of[step.source]
                    handed_over.add(step.source)
                    continue
                self._place(step.value, kinds, buffer_of, sizes, free)
                steps.append(step)
            else:
                for value in step.values.values():
                    if value not in buffer_of:
                        self._place(value, kinds, buffer_of, sizes, free)
                steps.append(step)
            for value, last in last_read.items():  # values last read here free their buffers for later steps
                if last == index and value in buffer_of and kinds[value] == INTERNAL and value not in handed_over:
                    free.append(buffer_of[value])
        value_bytes = [0 if layout is None else layout.nbytes for layout in self.layouts]
        return Sequence(self.library, steps, kinds, buffer_of, sizes, value_bytes, outputs)

    def _place(self, value: int, kinds, buffer_of: dict, sizes: list, free: list) -> None:
        """Give an internal value a planned buffer: the smallest free one that holds it, else a new one."""
        if kinds[value] != INTERNAL:
            return
        needed = self.layouts[value].nbytes
        fitting = [buffer for buffer in free if sizes[buffer] >= needed]
        if fitting:
            buffer = min(fitting, key=lambda b: sizes[b])
            free.remove(buffer)
        else:
            buffer = len(sizes)
            sizes.append(needed)
        buffer_of[value] = buffer


class Sequence:
    """``sequence(*inputs)``: the outputs (fresh flat float32 arrays of the output layouts' sizes) of the
    steps run on ``inputs`` (arrays in the input values' layouts, in the order the builder made them)."""

    def __init__(self, library: Library, steps: list, kinds: list[str], buffer_of: dict[int, int], sizes: list[int],
                 layouts_bytes: list[int], outputs: list[int]):
        self.library = library
        self.steps = steps
        self.kinds = kinds
        self.buffer_of = buffer_of
        self.sizes = sizes
        self.layouts_bytes = layouts_bytes  # each value's bytes
        self.output_floats = [-(-layouts_bytes[value] // 4) for value in outputs]
        self.inputs = [value for value, kind in enumerate(kinds) if kind == INPUT]
        self.outputs = list(outputs)
        self.scratch_bytes = max((step.primitive.scratchpad.nbytes for step in steps if isinstance(step, _Run)),
                                 default=0)
        self._local = threading.local()
        _sequences.add(self)

    @property
    def planned_bytes(self) -> int:
        """What this sequence's planned buffers need; a thread's arena holds the most any sequence needs."""
        return sum(self.sizes) + self.scratch_bytes

    def _thread_state(self):
        """This thread's buffers, memory objects and argument tables: (inputs' memory objects with the input
        each points at, outputs' likewise, the steps as (primitive handle, argument count, table, threads)
        or (copy destination, source) pairs, the buffers)."""
        library = self.library
        owned = _Memories(library)
        *buffers, scratch = _arena.lend([*self.sizes, self.scratch_bytes])
        position = {value: index for index, value in enumerate(self.inputs)}
        out_position = {value: index for index, value in enumerate(self.outputs)}
        pointed_inputs, pointed_outputs, steps = [], [], []
        for step in self.steps:
            if isinstance(step, _StartAs):
                floats = -(-self.layouts_bytes[step.value] // 4)
                steps.append((self._where(step.value, buffers, position, out_position),
                              self._where(step.source, buffers, position, out_position), floats))
                continue
            numbers, memories = [], []
            for number, (layout, array) in step.constants.items():
                memory = owned.create(layout)
                library.check(library.memory_set_data_handle(memory, address(array)), "memory")
                numbers.append(number)
                memories.append(memory)
            for number, value in step.values.items():
                memory = owned.create(step.primitive.layout(number))
                kind = self.kinds[value]
                if kind == INPUT:
                    pointed_inputs.append((memory, position[value]))
                elif kind == OUTPUT:
                    pointed_outputs.append((memory, out_position[value]))
                else:
                    library.check(library.memory_set_data_handle(memory, address(buffers[self.buffer_of[value]])),
                                  "memory")
                numbers.append(number)
                memories.append(memory)
            if step.primitive.scratchpad.nbytes:
                memory = owned.create(step.primitive.scratchpad)
                library.check(library.memory_set_data_handle(memory, address(scratch)), "memory")
                numbers.append(ARG_SCRATCHPAD)
                memories.append(memory)
            table = (ExecArg * len(numbers))(*(ExecArg(n, m) for n, m in zip(numbers, memories)))
            steps.append((step.primitive.handle, len(numbers), table, step.threads))
        state = self._local.state = (pointed_inputs, pointed_outputs, steps, _arena.generation, owned)
        return state

    def _where(self, value: int, buffers, position, out_position):
        """A copy step's operand: ("buffer", array), ("input", index) or ("output", index)."""
        kind = self.kinds[value]
        if kind == INPUT:
            return ("input", position[value])
        if kind == OUTPUT:
            return ("output", out_position[value])
        return ("buffer", buffers[self.buffer_of[value]])

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        state = getattr(self._local, "state", None)
        if state is None or state[3] != _arena.generation:  # first call here, or the arena's buffers moved
            state = self._thread_state()
        pointed_inputs, pointed_outputs, steps = state[0], state[1], state[2]
        library = self.library
        set_handle, check = library.memory_set_data_handle, library.check
        for memory, index in pointed_inputs:
            check(set_handle(memory, address(inputs[index])), "memory")
        outputs = [output_array((count,), np.float32) for count in self.output_floats]
        for memory, index in pointed_outputs:
            check(set_handle(memory, address(outputs[index])), "memory")
        execute, stream, threads = library.primitive_execute, library.stream, 0
        for step in steps:
            if len(step) == 3:  # a buffer starts as a copy of another
                destination, source, floats = step
                np.copyto(_resolve(destination, inputs, outputs)[:floats], _resolve(source, inputs, outputs)[:floats])
                continue
            handle, count, table, step_threads = step
            if step_threads != threads:
                library.set_threads(step_threads)
                threads = step_threads
            check(execute(handle, stream, count, table), "execute")
        check(library.stream_wait(stream), "wait")
        return outputs


def _resolve(where, inputs, outputs) -> np.ndarray:
    """A copy step's operand as a flat array."""
    kind, item = where
    if kind == "buffer":
        return item
    return (inputs[item] if kind == "input" else outputs[item]).reshape(-1)


class _Arena(threading.local):
    """One thread's planned buffers, lent to every sequence that thread runs.

    A sequence's buffers hold its values only while it runs (what leaves it is a fresh array), and a
    thread runs one sequence at a time (a call runs primitives only, no Python that could start
    another), so all sequences of all models a thread runs can share them: the memory held between
    calls is the most one sequence needs, not the sum (YOLOv5's seven runs held 47.7 MiB each their
    own).  A sequence asks for its sizes, largest first, so that large buffers meet large ones.  Where
    a buffer must grow, it is replaced and ``generation`` moves on: the sequences that pointed memory
    objects at the old one point them again on their next call."""

    def __init__(self):
        self.buffers: list[np.ndarray] = []
        self.generation = 0

    def lend(self, sizes: list[int]) -> list[np.ndarray]:
        """Buffers of at least ``sizes`` bytes each (distinct, aligned to float32), in the order asked."""
        order = sorted(range(len(sizes)), key=lambda index: -sizes[index])
        lent: list = [None] * len(sizes)
        for rank, index in enumerate(order):
            floats = max(1, -(-sizes[index] // 4))
            if rank == len(self.buffers):
                self.buffers.append(np.empty(floats, np.float32))
            elif self.buffers[rank].size < floats:
                self.buffers[rank] = np.empty(floats, np.float32)
                self.generation += 1
            lent[index] = self.buffers[rank]
        return lent

    @property
    def nbytes(self) -> int:
        return sum(buffer.nbytes for buffer in self.buffers)


_arena = _Arena()
_sequences: weakref.WeakSet = weakref.WeakSet()  # every live sequence, whose thread states a release drops


def arena_bytes() -> int:
    """What this thread's arena holds (for tests and profiles)."""
    return _arena.nbytes


def release_arena() -> int:
    """Give back the buffers this thread's arena holds between calls, as ONNX Runtime's arena shrinkage
    does at the end of a run; returns the bytes released.  Every sequence drops what this thread had
    pointed at them (its memory objects; a copy step's buffer), so the memory is freed now, and plans
    them again on its next call here.  For a service thread that once ran a large batch."""
    released = _arena.nbytes
    _arena.buffers = []
    _arena.generation += 1
    for sequence in list(_sequences):
        sequence._local.__dict__.pop("state", None)
    return released
