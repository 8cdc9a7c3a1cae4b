"""A warm call's values laid out in one arena per thread, so that steady-state calls allocate nothing
but the arrays they return (issue 44: a call a device can replay; ONNX Runtime plans its buffers so).

A model's second call (the first one after its steps specialized) is recorded: each step's requests
for arrays (``kuiper.output_buffers.output_array``, which native kernels use), and which requests and
which inputs each output shares memory with (a reshape is a view of its input; an op may write into
an input the graph lent it).  From that, ``Recorder.finish`` gives each request that holds an output a
lifetime, from its step to the last step reading the output or any view of it, and ``MemoryPlan``
places the requests in one arena with the greedy-by-size placement TFLite's and ONNX Runtime's planners
use (``place``): largest first, each at the lowest offset no request living at the same time occupies.
Not planned: a request whose array reaches a model output (the caller owns what a call returns), one
that holds no output (a kernel's scratch, which a later call's path may use otherwise), and the requests
of an op that runs sub-graphs (a loop's body would take the loop's buffer at every iteration).

Later calls with the same feed shapes offer each step its buffers; a kernel that asks for an array of
another shape, or in another order, gets a fresh one.  So a plan can be unused, never wrong, provided an
op's outputs share memory with its inputs and its requests in a way fixed by the shapes it runs, which
kuiper's ops do (an op that returned an input for some values and a copy for others would break it).
Every request of a multi-output step lives as long as its longest-lived output, so the order in which
an op hands out its buffers can differ from the recording's without harm.

``KUIPER_MEMORY_PLAN=0`` (read when a model is built) turns planning off.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .heap import give_back_freed_memory

ALIGNMENT = 64  # bytes: a cache line, and what oneDNN's and NumPy's SIMD loads like
SWITCH_ENV = "KUIPER_MEMORY_PLAN"


@dataclass
class _Request:
    step: int
    position: int  # the step's how-manieth request
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    last_use: int = -1
    escapes: bool = False  # reaches a model output
    offset: int = 0


class Recorder:
    """What a MemoryPlan needs from the recording call, collected step by step so that no value is kept
    alive longer than the call keeps it: for each slot, the requests whose memory its value uses."""

    def __init__(self, slot_count: int, step_count: int):
        self.step_count = step_count
        self.roots: list[frozenset] = [frozenset()] * slot_count
        self.requests: dict[tuple[int, int], _Request] = {}
        self.step_groups: list[tuple] = []  # the planned requests of each step with several outputs

    def after_step(self, index: int, input_slots, output_slots, inputs: list, outputs: tuple, requested: list,
                   plannable: bool) -> None:
        """Record step ``index``: ``requested`` are the arrays it asked ``output_array`` for, in order."""
        for slot in input_slots:
            for root in self.roots[slot]:
                self.requests[root].last_use = index
        ids = []
        for position, array in enumerate(requested):
            if plannable:
                key = (index, position)
                self.requests[key] = _Request(index, position, array.shape, array.dtype, array.nbytes, last_use=index)
                ids.append((key, array))
        input_roots = [(arrays_of(value), self.roots[slot]) for slot, value in zip(input_slots, inputs)]
        kept = set()
        for slot, value in zip(output_slots, outputs):
            arrays = arrays_of(value)
            if arrays is None:  # a value of unknown make-up: it may hold any of them
                roots = frozenset(key for key, _ in ids).union(*(roots for _, roots in input_roots))
            else:
                roots = frozenset(key for key, made in ids if _shares(arrays, [made]))
                for held, input_root in input_roots:
                    if input_root and (held is None or _shares(arrays, held)):
                        roots |= input_root
            self.roots[slot] = roots
            kept |= {key for key, _ in ids if key in roots}
        for key, _ in ids:  # scratch: not planned (the module's notes)
            if key not in kept:
                del self.requests[key]
        if len(kept) > 1:
            self.step_groups.append(tuple(kept))

    def finish(self, output_slots) -> "MemoryPlan | None":
        for slot in output_slots:
            for root in self.roots[slot]:
                self.requests[root].escapes = True
        # A multi-output step's buffers all live as long as its longest-lived output.
        for group in self.step_groups:
            last = max(self.requests[key].last_use for key in group)
            escapes = any(self.requests[key].escapes for key in group)
            for key in group:
                self.requests[key].last_use, self.requests[key].escapes = last, escapes
        planned = [request for request in self.requests.values() if not request.escapes and request.nbytes]
        return MemoryPlan(planned, self.step_count) if planned else None


def arrays_of(value) -> list[np.ndarray] | None:
    """The NumPy arrays whose memory a value uses: itself, a native layout's buffer (``.buffer``), the
    members of a tuple; [] for a Python number; None when it cannot be told."""
    if isinstance(value, np.ndarray):
        return [value]
    buffer = getattr(value, "buffer", None)
    if isinstance(buffer, np.ndarray):
        return [buffer]
    if isinstance(value, (tuple, list)):
        arrays: list[np.ndarray] = []
        for item in value:
            inner = arrays_of(item)
            if inner is None:
                return None
            arrays += inner
        return arrays
    if value is None or isinstance(value, (bool, int, float, complex, str, np.generic)):
        return []
    return None


def _shares(arrays: list[np.ndarray], others: list[np.ndarray]) -> bool:
    return any(np.may_share_memory(a, b) for a in arrays for b in others)


def place(requests: list[_Request]) -> int:
    """Set each request's ``offset`` (greedy by size: largest first, lowest free offset among the requests
    whose lifetimes overlap its own); returns the arena's size in bytes."""
    placed: list[_Request] = []
    size = 0
    for request in sorted(requests, key=lambda r: (-r.nbytes, r.step, r.position)):
        overlapping = sorted((other for other in placed
                              if other.step <= request.last_use and request.step <= other.last_use),
                             key=lambda other: other.offset)
        offset = 0
        for other in overlapping:
            if offset + request.nbytes <= other.offset:
                break
            offset = max(offset, _aligned(other.offset + other.nbytes))
        request.offset = offset
        placed.append(request)
        size = max(size, offset + request.nbytes)
    return size


def _aligned(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT


class MemoryPlan:
    """The requests of one set of feed shapes placed in an arena; ``offers()`` gives this thread's buffers,
    step by step (a tuple per planned step, in request order, None where a request is not planned)."""

    def __init__(self, requests: list[_Request], step_count: int):
        self.requests, self.step_count = requests, step_count
        self.nbytes = place(requests)
        self._local = threading.local()

    def offers(self) -> list:
        """Per step, the buffers offered to it (None: none)."""
        offers = getattr(self._local, "offers", None)
        if offers is None:
            give_back_freed_memory()  # the earlier calls' values, which the arena now holds
            raw = np.empty(self.nbytes + ALIGNMENT, np.uint8)
            start = -raw.ctypes.data % ALIGNMENT
            self._local.arena = raw[start:start + self.nbytes]
            offers = self._local.offers = self._make_offers(self._local.arena)
        return offers

    def _make_offers(self, arena: np.ndarray) -> list:
        by_step: dict[int, dict[int, np.ndarray]] = {}
        for request in self.requests:
            view = arena[request.offset:request.offset + request.nbytes].view(request.dtype).reshape(request.shape)
            by_step.setdefault(request.step, {})[request.position] = view
        offers: list = [None] * self.step_count
        for step, views in by_step.items():
            offers[step] = tuple(views.get(position) for position in range(max(views) + 1))
        return offers

    def holds(self, value) -> bool:
        """Whether ``value``, an array, uses this thread's arena (a model output must not: the next call
        overwrites it)."""
        if not isinstance(value, np.ndarray) or value.base is None:  # an array of its own (most outputs)
            return False
        arena = getattr(self._local, "arena", None)
        return arena is not None and np.may_share_memory(value, arena)
