"""Model: a built graph, bound to one backend, that maps feeds to outputs.

A Model holds no per-call state (each call has its own value slots), so one
Model can be called from many threads at once.  It pickles as the recipe that
made it (``origin``: the loader and its arguments), never as arrays, so a
Dask worker that receives one rebuilds it from the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InputError, KuiperError, ShapeError
from ..limits import check_feeds
from ..model_ir import ModelIR, OpNode


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as the file declares it; None dims are free."""

    name: str
    shape: tuple | None
    dtype: str | None

    def __str__(self) -> str:
        dims = "?" if self.shape is None else "(" + ", ".join("?" if d is None else str(d) for d in self.shape) + ")"
        return f"{self.name}: {dims} {self.dtype or '?'}"


@dataclass
class Step:
    op: Any
    node: OpNode
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    free_slots: tuple[int, ...]


class OpExecutionError(KuiperError):
    """An op failed while running; the message names the op and the input shapes it saw."""


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


@dataclass
class Model:
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
        self, feeds: Mapping[str, Any], to_numpy: bool = False, observer: StepObserver | None = None
    ) -> dict[str, Any]:
        """Run with feeds by input name; returns ``{output name: array}``."""
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
        return {spec.name: value for spec, value in zip(self.outputs, results)}

    def _execute(self, arrays: list, to_numpy: bool, observer: StepObserver | None = None) -> list:
        slots: list[Any] = [None] * self.slot_count
        for spec, slot, array in zip(self.inputs, self.input_slots, arrays):
            slots[slot] = self._check_feed(spec, array)
        check_feeds(self, [slots[slot] for slot in self.input_slots])  # kuiper.limits: size budget
        for step in self.steps:
            inputs = [slots[i] for i in step.input_slots]
            if observer is not None:
                observer.before_step(step.node, inputs)
            try:
                result = step.op.forward(*inputs)
            except KuiperError as exc:
                named = _naming_the_op(exc, step)
                if named is exc:
                    raise
                raise named from exc
            except Exception as exc:  # any failure inside an op becomes a KuiperError naming it
                translated = self.backend.device_error(exc)
                if translated is not None:
                    raise translated from exc
                shapes = ", ".join(_describe_value(value) for value in inputs)
                reason = "out of memory" if isinstance(exc, MemoryError) else f"{type(exc).__name__}: {exc}"
                raise OpExecutionError(f"{step.node.describe()} failed on inputs [{shapes}]: {reason}") from exc
            if len(step.output_slots) == 1:
                slots[step.output_slots[0]] = result
                outputs = (result,)
            else:
                if not isinstance(result, (tuple, list)) or len(result) != len(step.output_slots):
                    raise OpExecutionError(
                        f"{step.node.describe()} returned {_count(result)} value(s) for {len(step.output_slots)} outputs"
                    )
                for slot, value in zip(step.output_slots, result):
                    slots[slot] = value
                outputs = tuple(result)
            if observer is not None:
                observer.after_step(step.node, inputs, outputs)
            del inputs
            for slot in step.free_slots:
                slots[slot] = None
        results = [slots[slot] for slot in self.output_slots]
        if to_numpy:
            results = [self.backend.to_numpy(r) if self.backend.is_array(r) else np.asarray(r) for r in results]
        return results

    def _check_feed(self, spec: TensorSpec, array):
        """Same rank, same size on every fixed dim but the batch (dim 0), a compatible dtype."""
        if not (self.backend.is_array(array) or isinstance(array, np.ndarray)):
            if not any(hasattr(array, p) for p in ("__array__", "__dlpack__", "__cuda_array_interface__")):
                raise InputError(f"{self._where()}: input '{spec.name}' must be an array, got {type(array).__name__}")
            array = self.backend.asarray(array)  # other libraries' arrays, by the array protocols
        expected = spec.dtype
        if expected is not None:
            expected_dtype = np.dtype(expected)
            if array.dtype != expected_dtype:
                same_kind = (array.dtype.kind == "f" and expected_dtype.kind == "f") or (
                    array.dtype.kind in "iu" and expected_dtype.kind in "iu"
                )
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


def _fmt(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


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
