"""Model: a built graph, bound to one backend, that maps feeds to outputs.

A Model holds no per-call state (each call has its own value slots), so one
Model can be called from many threads at once.  It pickles as the recipe that
made it (``origin``: the loader and its arguments), never as arrays, so a
Dask worker that receives one rebuilds it from the file.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import InputError, KuiperError, ShapeError
from ..ir import dtypes
from ..limits import budget_bytes, budget_of_run, check_feeds
from ..model_ir import ModelIR
from ..thread_limits import limited
from .kept_weights import drop_weights_no_step_reads
from .plan import ExecutionPlan, Step, StepObserver
from .summary import ModelSummary, one_line, summarize

logger = logging.getLogger(__name__)

# A first run still going after this many seconds is most likely compiling kernels: say so once.
FIRST_RUN_NOTE_AFTER_S = 2.0
FIRST_RUN_NOTE = (
    "%s: the first run is still going after %.0f s: a model's first run compiles its kernels (Numba on the CPU, "
    "CUDA on the GPU), which takes about 10 s with an empty cache; later runs and processes reuse them"
)
_first_run_noted = threading.Event()


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as the file declares it; None dims are free."""

    name: str
    shape: tuple | None
    dtype: str | None

    def __str__(self) -> str:
        dims = "?" if self.shape is None else "(" + ", ".join("?" if d is None else str(d) for d in self.shape) + ")"
        return f"{self.name}: {dims} {self.dtype or '?'}"


@dataclass(frozen=True)
class Origin:
    """How a Model was made: ``loader(**arguments)`` builds it again (used to pickle it).

    ``loader`` must be importable by name (a module-level function such as
    ``kuiper.load``), and ``arguments`` plain values (paths, names, flags).
    """

    loader: Callable
    arguments: dict


def _rebuild(loader: Callable, arguments: dict):
    return loader(**arguments)


@dataclass(repr=False)
class Model:
    """A built model: ``model(x, ...)`` or ``model.run(feeds)``; ``repr`` is one line, ``summary()`` a table.

    ``threads`` (set by ``kuiper.load(..., threads=N)``) caps the CPU threads of each run
    (kuiper.thread_limits); None leaves the libraries' defaults.
    """

    backend: Any
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    input_slots: list[int]
    output_slots: list[int]
    slot_count: int
    steps: list[Step]
    source: str = ""
    fused_groups: list[list[str]] = field(default_factory=list)
    ir: ModelIR | None = None
    origin: Origin | None = None
    threads: int | None = None
    # A loop body's inputs its ops may overwrite (kuiper/graph/build.py, _owned_state): the loop hands it
    # arrays of its own there.
    owned_inputs: tuple[int, ...] = ()
    _has_run: bool = field(default=False, init=False, compare=False)
    # Per input, (class, dtype, shape) of the last feed that passed _check_feed unchanged (_run_steps).
    _accepted_feeds: list = field(default_factory=list, init=False, compare=False)
    _feeds_checked_within: int | None = field(default=None, init=False, compare=False)  # that budget
    plan: ExecutionPlan = field(init=False, compare=False)
    blas_threads: int | None = field(init=False, compare=False, default=None)  # see __post_init__

    def __post_init__(self):
        self._accepted_feeds = [None] * len(self.inputs)
        untyped = [slot for spec, slot in zip(self.inputs, self.input_slots) if spec.dtype is None]
        self.plan = ExecutionPlan(self.steps, self.backend, self.input_slots, self.output_slots, self.slot_count,
                                  untyped)
        # Kernels on a thread pool of their own (oneDNN's OpenMP threads) own the cores: BLAS then runs
        # on the calling thread (the backend says so, kuiper.backends.base.Backend.blas_threads).
        self.blas_threads = self.backend.blas_threads()

    # -- pickling -----------------------------------------------------------------
    def __reduce__(self):
        if self.origin is None:
            raise KuiperError(
                f"{self._where()}: this Model was built from an in-memory graph and cannot be pickled; "
                "load it from a file (kuiper.load) to get a Model that pickles as its path and options"
            )
        return _rebuild, (self.origin.loader, dict(self.origin.arguments))

    # -- running ------------------------------------------------------------------
    def __call__(self, *arrays, to_numpy: bool = False, observer: StepObserver | None = None):
        """Run with positional feeds in ``self.inputs`` order; one output or a tuple of outputs."""
        if len(arrays) != len(self.inputs):
            names = ", ".join(spec.name for spec in self.inputs)
            raise InputError(f"{self._where()}: expected {len(self.inputs)} input(s) ({names}), got {len(arrays)}")
        results = self._execute(list(arrays), to_numpy, observer)
        return results[0] if len(results) == 1 else tuple(results)

    def run(
        self,
        output_names: Sequence[str] | Mapping[str, Any] | None,
        feeds: Mapping[str, Any] | None = None,
        *,
        to_numpy: bool = False,
        observer: StepObserver | None = None,
    ):
        """Run with feeds by input name.

        ``model.run(feeds)`` returns ``{output name: array}`` for every output.
        ``model.run(["out", ...], feeds)``, as ONNX Runtime's ``InferenceSession.run(output_names,
        input_feed)``, returns a list of the named outputs in that order (``None``: all outputs).
        """
        if feeds is None:  # run(feeds): the one argument must be the feeds
            feeds, wanted = output_names, None
        else:
            wanted = self._output_positions(output_names)
        if not isinstance(feeds, Mapping):
            raise InputError(
                f"{self._where()}: run() takes a mapping {{input name: array}}, got {type(feeds).__name__}; "
                "call the model itself, model(x, ...), to pass arrays by position"
            )
        known = {spec.name for spec in self.inputs}
        unknown = sorted(set(feeds) - known)
        if unknown:
            raise InputError(f"{self._where()}: unknown input(s) {unknown}; the model's inputs are {sorted(known)}")
        missing = [spec.name for spec in self.inputs if spec.name not in feeds]
        if missing:
            raise InputError(f"{self._where()}: missing feed(s) for input(s) {missing}")
        results = self._execute([feeds[spec.name] for spec in self.inputs], to_numpy, observer)
        if wanted is None:
            return {spec.name: value for spec, value in zip(self.outputs, results)}
        return [results[position] for position in wanted]

    def _output_positions(self, output_names) -> list[int]:
        """Positions in ``self.outputs`` of the named outputs (None: all of them)."""
        if output_names is None:
            return list(range(len(self.outputs)))
        if isinstance(output_names, str) or not isinstance(output_names, Sequence) or not all(
            isinstance(name, str) for name in output_names
        ):
            raise InputError(
                f"{self._where()}: run(output_names, feeds) takes a list of output names (or None for all), "
                f"got {type(output_names).__name__} {output_names!r:.60}"
            )
        position = {}
        for index, spec in enumerate(self.outputs):
            position.setdefault(spec.name, index)
        unknown = [name for name in output_names if name not in position]
        if unknown:
            raise InputError(f"{self._where()}: unknown output name(s) {unknown}; "
                             f"the model's outputs are {[spec.name for spec in self.outputs]}")
        return [position[name] for name in output_names]

    def _execute(self, arrays: list, to_numpy: bool, observer: StepObserver | None = None) -> list:
        first_run, self._has_run = not self._has_run, True
        if first_run and self.ir is not None:
            # By now the IR a loader read is gone: the file's arrays that only this model's IR holds (the
            # build folded them into other ops' weights) can go too.
            drop_weights_no_step_reads([(step.node, step.op) for step in self.steps], self.ir)
        note = _noting_a_slow_first_run(self._where()) if first_run else contextlib.nullcontext()
        quiet = self.backend.floating_point_warnings_off()
        with limited(self.threads, self.blas_threads), budget_of_run(), note, quiet:
            return self._run_steps(arrays, to_numpy, observer)

    def _run_steps(self, arrays: list, to_numpy: bool, observer: StepObserver | None) -> list:
        slots: list[Any] = [None] * self.slot_count
        # A feed of the class, dtype and shape of one that passed ``_check_feed`` unchanged before passes
        # again unchanged: it goes in as it is (0.4 us, where the checks cost 1.6 a feed, and JAX passes a
        # GPT-2's forty weights at every call).  The size budget is checked again only when a feed is new to
        # this model or the budget changed.
        accepted, all_known = self._accepted_feeds, True
        for position, (spec, slot, array) in enumerate(zip(self.inputs, self.input_slots, arrays)):
            known = accepted[position]
            # The dtype by identity: an unpickled array's float32 equals NumPy's but is another object, which
            # _canonical_dtype replaces.
            if (known is not None and array.__class__ is known[0] and getattr(array, "dtype", None) is known[1]
                    and getattr(array, "shape", None) == known[2]):
                slots[slot] = array
                continue
            key = (array.__class__, getattr(array, "dtype", None), getattr(array, "shape", None))
            all_known = False
            checked = slots[slot] = _canonical_dtype(self._check_feed(spec, array))
            if checked is array:
                accepted[position] = key
        budget = budget_bytes()
        if not all_known or budget != self._feeds_checked_within:
            check_feeds(self, [slots[slot] for slot in self.input_slots])  # kuiper.limits: size budget
            self._feeds_checked_within = budget
        if observer is None:
            self.plan.run_call(slots)
        else:
            self.plan.run_observed(slots, observer)
        results = [slots[slot] for slot in self.output_slots]
        if to_numpy:
            results = [self.backend.to_numpy(r) if self.backend.is_array(r) else np.asarray(r) for r in results]
        return results

    def call_within(self, arrays, checked: bool = True) -> list:
        """Run as the sub-graph of an op of a running model (a loop's body or condition, a branch); the
        results as a list.

        The feeds are values the outer plan made, in a call that already holds the thread limits,
        the size budget and the warning state: a feed that is an array of the declared dtype goes
        in as it is, anything else takes ``__call__``'s checks.  Those checks were 17 of an LSTM's
        32 us per loop iteration (a Flax LSTM carries its weights through the loop's state).
        ``checked=False`` skips even the dtype test, for feeds this sub-graph's own plan (or one
        with the same outputs) made: a loop's state after its first iteration."""
        slots: list[Any] = [None] * self.slot_count
        if checked:
            is_array, name_of = self.backend.is_array, dtypes.name_of
            for spec, slot, array in zip(self.inputs, self.input_slots, arrays):
                if not is_array(array) or (spec.dtype is not None and name_of(array.dtype) != spec.dtype):
                    array = self._check_feed(spec, array)
                slots[slot] = array
        else:
            for slot, array in zip(self.input_slots, arrays):
                slots[slot] = array
        self.plan.run(slots)
        return [slots[slot] for slot in self.output_slots]

    def loop_step(self) -> Callable:
        """``step(values) -> outputs`` for a loop that runs this sub-graph at every iteration after its first
        (values its own plan made, taken unchecked): ``ExecutionPlan.state_step`` over this model's slots."""
        return self.plan.state_step(self.input_slots, self.output_slots, self.slot_count)

    def _check_feed(self, spec: TensorSpec, array):
        """Same rank, same size on every fixed dim but the batch (dim 0), a compatible dtype."""
        if not (self.backend.is_array(array) or isinstance(array, np.ndarray)):
            if not any(hasattr(array, p) for p in ("__array__", "__dlpack__", "__cuda_array_interface__")):
                raise InputError(f"{self._where()}: input '{spec.name}' must be an array, got {type(array).__name__}")
            try:
                array = self.backend.asarray(array)  # other libraries' arrays, by the array protocols
            except (RuntimeError, TypeError, ValueError, BufferError) as exc:
                # A PyTorch tensor that requires grad, or of a dtype NumPy lacks (bfloat16), refuses the protocols.
                raise InputError(
                    f"{self._where()}: input '{spec.name}': a {type(array).__name__} that does not convert to an "
                    f"array ({type(exc).__name__}: {exc}); pass a NumPy array, e.g. for a PyTorch tensor "
                    f"x.detach().cpu().float().numpy()"
                ) from exc
        expected = spec.dtype
        if expected is not None:
            got = dtypes.name_of(array.dtype)
            if got != expected:
                same_kind = dtypes.array_category(got) == dtypes.array_category(expected) in (dtypes.FLOAT, dtypes.INT)
                if not same_kind:
                    raise InputError(
                        f"{self._where()}: input '{spec.name}' expects dtype {expected}, got {array.dtype} "
                        f"(convert it first, e.g. x.astype('{expected}'))"
                    )
        if spec.shape is not None:
            shape = tuple(array.shape)
            if len(shape) != len(spec.shape):
                raise ShapeError(
                    f"{self._where()}: input '{spec.name}' expects rank {len(spec.shape)} {_fmt(spec.shape)}, "
                    f"got shape {shape}"
                )
            for axis, (want, got) in enumerate(zip(spec.shape, shape)):
                if want is not None and axis != 0 and want != got:
                    raise ShapeError(
                        f"{self._where()}: input '{spec.name}' expects shape {_fmt(spec.shape)} "
                        f"(dim 0 and '?' dims may vary), got {shape}: dim {axis} must be {want}"
                    )
        return self.backend.asarray(array, dtype=expected)

    def _where(self) -> str:
        return self.source or "model"

    # -- introspection -------------------------------------------------------------
    @property
    def parameter_count(self) -> int:
        return 0 if self.ir is None else self.ir.parameter_count()

    def __repr__(self) -> str:
        return one_line(self)

    def summary(self, *inputs) -> ModelSummary:
        """A table of the executed nodes: name, op type, output shapes and parameter count, with totals.

        Without inputs the shapes are those the file declares (at its export batch); with
        inputs (as for ``model(...)``) the model runs once and the table shows the shapes seen.
        """
        seen = None
        if inputs:
            observer = _ShapeRecorder()
            self(*inputs, observer=observer)
            seen = observer.shapes
        return summarize(self, seen)


class _ShapeRecorder(StepObserver):
    def __init__(self):
        self.shapes: dict[str, list] = {}

    def after_step(self, node, inputs, outputs) -> None:
        self.shapes[node.name] = [getattr(value, "shape", None) for value in outputs]


def _canonical_dtype(array):
    """A NumPy array whose dtype equals a built-in one but is another object (an unpickled array's: what a
    Dask worker receives), as a view with the built-in dtype: kernels' guards test dtypes by identity, and
    would send every such feed to their slow paths."""
    if isinstance(array, np.ndarray):
        dtype = array.dtype
        if dtype.isbuiltin == 0 and dtype.fields is None and dtype.metadata is None:
            canonical = np.dtype(dtype.str)
            if canonical is not dtype and canonical == dtype:
                return array.view(canonical)
    return array


@contextlib.contextmanager
def _noting_a_slow_first_run(where: str):
    """Log FIRST_RUN_NOTE (once per process, at INFO) if this first run takes long, while it runs."""
    if _first_run_noted.is_set():
        yield
        return

    def note() -> None:
        if not _first_run_noted.is_set():
            _first_run_noted.set()
            logger.info(FIRST_RUN_NOTE, where, FIRST_RUN_NOTE_AFTER_S)

    timer = threading.Timer(FIRST_RUN_NOTE_AFTER_S, note)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _fmt(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"
