#!/usr/bin/env python3
"""Run every valid module of an XLA checkout's tests through kuiper and through XLA's CPU backend.

  PYTHONPATH=$PWD python tools/hlo_corpus_against_xla.py /path/to/xla            # counts
  PYTHONPATH=$PWD python tools/hlo_corpus_against_xla.py /path/to/xla --show 50 --only reduce

Needs jax (not a kuiper dependency). The modules are the valid ones that ``tools/hlo_conformance.py``
extracts; XLA compiles and runs each through ``xla_run`` of ``tools/check_hlo_opcodes_against_xla.py``.
Each entry parameter gets seeded random values (seeded by the module's origin, so a run is repeatable):
integers in [-4, 4] (unsigned [0, 8], clipped to the type), preds, floats in [-1, 1]. Index operands of
gather, dynamic-slice ... are such values too, so out-of-range indices occur: both engines clamp them
as the operation semantics say. Two kinds of parameter get values that keep the result defined: the
init value of a reduction gets the reducer's identity (XLA may apply an init value any number of
times), and the size of a ``set-dimension-size`` a value within the dim's bound.

Results are compared as XLA's own tests compare them (an element matches when its absolute *or* its
relative error is within bounds, as ``ErrorSpec`` does): integers and preds exactly; f32, f64 and
complex with ErrorSpec(1e-3, 1e-3), the float-reduction tolerance of ``xla/tests/reduce_window_test.cc``
(``DefaultErrorSpec``); f16, bf16 and the 8- and 4-bit floats with that file's bf16 tolerance
ErrorSpec(2e-1, 6e-2). NaN must meet NaN and an infinity the same infinity.

Each module runs in a worker process with a time limit (a module that hangs or kills its process does
not stop the run); a module whose instructions declare an array of more than 2**24 elements is skipped.
``--huge`` runs just those modules, through kuiper alone (XLA's CPU backend would need their memory
too), to see that each ends in results or a KuiperError (kuiper's memory budget), never a dead worker;
the worker's address space is capped at ``--huge-memory`` GiB, so a module that escapes the budget
fails with a MemoryError (counted as a crash) instead of exhausting the machine.
Any exception from kuiper that is not a KuiperError is a crash, and is listed. A disagreement where XLA
leaves the result open (``rng`` values, the order of equal keys in a sort without ``is_stable``, a
reduction whose constant init value is not the reducer's identity) is counted as "unspecified", and
the few checked by hand (``HAND_CHECKED``) say why.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
import traceback
import warnings
import zlib
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
from check_hlo_opcodes_against_xla import xla_run
from hlo_conformance import extract

import kuiper
from kuiper.errors import InputError, KuiperError, UnsupportedOperatorError
from kuiper.hlo import parse

HUGE_ELEMENTS = 2**24
HUGE_INPUT_BYTES = 2**30  # --huge: parameters whose random values (drawn in 64 bits) take more are not fed
TIME_LIMIT_S = 60.0
# (absolute, relative) bounds by result kind; see the module docstring for where they come from.
WIDE_FLOAT_SPEC = (1e-3, 1e-3)
NARROW_FLOAT_SPEC = (2e-1, 6e-2)
KUIPER_FINISHED = "kuiper finished"
# Disagreements checked by hand: origin -> (outcome, why).
HAND_CHECKED = {
    "xla/tools/compute_cost_test.hlo:1": (
        "XLA's result is wrong", "broadcast of s8[10] to s8[10,20]: rows 1-9 come back from jaxlib as 0, not 4"),
    "xla/backends/cpu/benchmarks/hlo/resnet50_keras_jax_f32.hlo:1": (
        "XLA's result is wrong", "random batch-norm variances make the last block's activations NaN in both "
        "engines (XLA's relu of them alone: 100352 of 100352 NaN); XLA's reduce_sum of that relu, fused, gives "
        "finite values (the fused code drops NaNs), kuiper NaN as maximum and add define it"),
}
IDENTITY_OF = {"add": 0, "or": 0, "xor": 0, "multiply": 1, "and": 1, "maximum": -np.inf, "minimum": np.inf}


def _dtype(shape) -> np.dtype:
    return np.dtype(shape.dtype) if hasattr(np, shape.dtype) else np.dtype(getattr(ml_dtypes, shape.dtype))


def random_input(shape, rng: np.random.Generator) -> np.ndarray:
    """Seeded values for one entry parameter of array shape ``shape``."""
    dtype = _dtype(shape)
    dims = shape.dims
    if dtype == np.bool_:
        return rng.integers(0, 2, dims).astype(bool)
    if dtype.kind in "iu" or shape.element_type[0] in "su":  # ml_dtypes' int4 ... have kind "V"
        limits = ml_dtypes.iinfo(dtype)
        low, high = (0, 8) if int(limits.min) == 0 else (-4, 4)
        return np.clip(rng.integers(low, high + 1, dims), int(limits.min), int(limits.max)).astype(dtype)
    values = rng.uniform(-1.0, 1.0, dims)
    if dtype.kind == "c":
        values = values + 1j * rng.uniform(-1.0, 1.0, dims)
    if shape.element_type == "f8e8m0fnu":  # exponent only: no sign, no zero
        values = np.abs(values) + 0.25
    return values.astype(dtype)


def reducer_identities(module) -> dict[int, str]:
    """Entry parameters that are the init value of a reduction: parameter number -> the reducer's opcode.

    XLA may apply an init value more than once (it splits and reorders reductions), so its result is
    unspecified unless the init value is the reducer's identity; such a parameter gets that identity.
    """
    entry = module.entry
    numbers = {p.name: p.parameter_number for p in entry.parameters()}
    found: dict[int, str] = {}
    for instruction in entry.instructions:
        if instruction.opcode in ("reduce", "reduce-window"):
            inits = instruction.operands[len(instruction.operands) // 2:]
            reducer = module.computations.get(instruction.attributes.get("to_apply"))
        elif instruction.opcode == "select-and-scatter":
            inits = instruction.operands[2:]
            reducer = module.computations.get(instruction.attributes.get("scatter"))
        else:
            continue
        for number, init in enumerate(inits):
            opcode = reducer_opcode(reducer, number)
            if init in numbers and opcode in IDENTITY_OF:
                found[numbers[init]] = opcode
    return found


def dimension_sizes(module) -> dict[int, int]:
    """Entry parameters that ``set-dimension-size`` takes as a size: parameter number -> the dim's bound.

    A size outside [0, bound] is an invalid input (XLA leaves the result undefined), so these get one inside.
    """
    numbers = {p.name: p.parameter_number for p in module.entry.parameters()}
    found: dict[int, int] = {}
    for instruction in module.entry.instructions:
        if instruction.opcode == "set-dimension-size" and instruction.operands[1] in numbers:
            source = module.entry.by_name.get(instruction.operands[0])
            dims = instruction.attributes.get("dimensions") or [0]
            if source is not None and not source.shape.is_tuple:
                found[numbers[instruction.operands[1]]] = source.shape.dims[dims[0]]
    return found


def reducer_opcode(reducer, number: int) -> str:
    """The opcode that computes result ``number`` of a reducer computation ('' if none)."""
    if reducer is None:
        return ""
    if reducer.root.opcode != "tuple":
        return reducer.root.opcode
    computed = reducer.by_name.get(reducer.root.operands[number]) if number < len(reducer.root.operands) else None
    return computed.opcode if computed is not None else ""


def identity(opcode: str, dtype: np.dtype) -> np.ndarray:
    """The identity of a reducer ``opcode`` in ``dtype`` (a scalar)."""
    value = IDENTITY_OF[opcode]
    if dtype == np.bool_:
        return np.bool_(value in (1, np.inf))
    if dtype.kind in "iu" or (dtype.kind == "V" and "int" in dtype.name):
        limits = ml_dtypes.iinfo(dtype)
        value = {np.inf: limits.max, -np.inf: limits.min}.get(value, value)
    return np.asarray(value).astype(dtype)


def _is_identity(constant, opcode: str) -> bool:
    """Whether a scalar constant instruction holds the identity of the reducer ``opcode``."""
    word = str(constant.literal).lower()
    value = {"true": 1.0, "false": 0.0}.get(word)
    try:
        value = float(word) if value is None else value
    except ValueError:
        return True  # a literal this check cannot read: do not call the result unspecified
    wanted = identity(opcode, np.dtype(constant.shape.dtype if hasattr(np, constant.shape.dtype) else np.float32))
    return value == float(wanted)


def largest_array(module) -> int:
    return max((leaf.size() for c in module.computations.values() for i in c.instructions
                for leaf in i.shape.leaves()), default=0)


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind in "fc" or (array.dtype.kind == "V" and "float" in array.dtype.name)


def compare(got: np.ndarray, expected: np.ndarray) -> str:
    """'' when kuiper's result matches XLA's, else what differs."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"kuiper {got.dtype}{list(got.shape)}, XLA {expected.dtype}{list(expected.shape)}"
    if not _is_float(expected):
        wrong = np.flatnonzero(got.reshape(-1) != expected.reshape(-1))
        return f"{wrong.size} of {got.size} differ, first at {wrong[0]}" if wrong.size else ""
    narrow = expected.dtype.itemsize <= 2 or expected.dtype.kind == "V"
    bound_abs, bound_rel = NARROW_FLOAT_SPEC if narrow else WIDE_FLOAT_SPEC
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    g, e = got.astype(wide).reshape(-1), expected.astype(wide).reshape(-1)
    nan_g, nan_e = np.isnan(g), np.isnan(e)
    error = np.abs(g - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = error / np.abs(e)
    finite = ~nan_e & np.isfinite(e)
    ok = np.where(finite, (error <= bound_abs) | (relative <= bound_rel), (g == e) | (nan_g & nan_e))
    ok &= nan_g == nan_e
    wrong = np.flatnonzero(~ok)
    if not wrong.size:
        return ""
    at = wrong[0]
    return f"{wrong.size} of {g.size} differ, first at {at}: kuiper {g[at]}, XLA {e[at]}"


def refusal_reason(exc: Exception) -> str:
    """A short class for a KuiperError at load time, to count refusals by reason."""
    lines = str(exc).splitlines()
    if isinstance(exc, UnsupportedOperatorError) and len(lines) > 1:  # "  name in computation: opcode ..."
        opcodes = {line.split(": ", 1)[1].split(" (")[0].split(":")[0] for line in lines[1:] if ": " in line}
        return "unsupported opcode: " + ", ".join(sorted(opcodes))
    lowered = lines[0].lower()
    if "replica" in lowered or "device" in lowered or "partition" in lowered:
        return "multi-device collective"
    return f"{type(exc).__name__}: {lines[0].split(': ', 1)[-1][:70]}"


def check(text: str, origin: str, huge: bool = False, *, kuiper_finished) -> tuple[str, str]:
    """(outcome, detail) for one module; runs inside a worker process.

    kuiper runs first; ``kuiper_finished()`` is called before XLA runs, so that a process that dies
    afterwards is known to be XLA's crash, not kuiper's.
    """
    try:
        module = parse(text, source=origin)
    except KuiperError as exc:
        return "parse fails", str(exc).splitlines()[0][:200]
    if (largest_array(module) > HUGE_ELEMENTS) != huge:
        return ("skipped: not huge", "") if huge else ("skipped: huge arrays", f"{largest_array(module)} elements")
    parameters = [p.shape for p in module.entry.parameters()]
    if any(s.is_tuple or s.dtype is None for s in parameters):
        return "skipped: tuple or token parameter", ""
    if any(-1 in s.dims for s in parameters):
        return "skipped: unbounded dynamic parameter", ""
    try:
        model = kuiper.load_hlo(text, backend="numpy")
    except KuiperError as exc:
        return "kuiper refuses: " + refusal_reason(exc), str(exc).splitlines()[0][:200]
    except Exception as exc:  # noqa: BLE001 (a crash is what this tool reports)
        return "crash", f"load: {type(exc).__name__}: {exc} | {_where(exc)}"
    if huge and 8 * sum(s.size() for s in parameters) > HUGE_INPUT_BYTES:
        return "skipped: random inputs over 1 GiB", ""
    rng = np.random.default_rng(zlib.crc32(origin.encode()))
    inputs = [random_input(shape, rng) for shape in parameters]
    for number, opcode in reducer_identities(module).items():
        inputs[number] = identity(opcode, inputs[number].dtype)
    for number, bound in dimension_sizes(module).items():
        inputs[number] = np.asarray(rng.integers(0, bound + 1)).astype(inputs[number].dtype)
    try:
        result = model(*inputs, to_numpy=True)
    except InputError as exc:
        return "kuiper rejects the random inputs", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    except KuiperError as exc:
        return "kuiper fails at run time", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    except Exception as exc:  # noqa: BLE001
        return "crash", f"run: {type(exc).__name__}: {exc} | {_where(exc)}"
    if huge:
        return "kuiper ran (XLA not run: huge)", ""
    kuiper_finished()
    try:
        expected = xla_run(text, *inputs)
    except Exception as exc:  # noqa: BLE001 (jaxlib raises its own error types)
        return "XLA fails", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    got = [np.asarray(r) for r in result] if isinstance(result, tuple) else [np.asarray(result)]
    difference = f"kuiper gives {len(got)} results, XLA {len(expected)}" if len(got) != len(expected) else ""
    leaves = module.entry.root.shape.leaves()
    for number, (g, e) in enumerate(zip(got, expected)):
        if number < len(leaves) and any(leaves[number].dynamic) and g.ndim == e.ndim \
                and all(a <= b for a, b in zip(g.shape, e.shape)):
            # XLA hands a dynamic result back in a buffer of its bounds, its elements packed at the front.
            e = e.reshape(-1)[:g.size].reshape(g.shape)
        difference = difference or (f"result {number}: " + compare(g, e) if compare(g, e) else "")
    if not difference:
        return "agree", ""
    if origin in HAND_CHECKED:
        return HAND_CHECKED[origin]
    reason = unspecified(module, inputs)
    return ("unspecified: " + reason, difference) if reason else ("disagree", difference)


def unspecified(module, inputs: list[np.ndarray]) -> str:
    """Why XLA leaves this module's results open (so a different result is no error), or ''."""
    instructions = [i for c in module.computations.values() for i in c.instructions]
    if any(i.opcode == "rng" for i in instructions):
        return "rng values (XLA does not define its generator)"
    if _scatters_to_an_index_twice(module, inputs):
        return "a scatter to one index twice (XLA applies such updates in any order, and may combine them first)"
    if any(i.opcode == "sort" and not i.attributes.get("is_stable") for i in instructions):
        return "the order of equal keys in a sort without is_stable"
    for instruction in instructions:
        if instruction.opcode not in ("reduce", "reduce-window"):
            continue
        computation = module.computations[instruction.computation]
        reducer = module.computations.get(instruction.attributes.get("to_apply"))
        for number, name in enumerate(instruction.operands[len(instruction.operands) // 2:]):
            init, opcode = computation.by_name.get(name), reducer_opcode(reducer, number)
            if init is not None and init.opcode == "constant" and opcode in IDENTITY_OF \
                    and not _is_identity(init, opcode):
                return "a reduction whose init value is not the reducer's identity (XLA may apply it many times)"
    return ""


def _scatters_to_an_index_twice(module, inputs: list[np.ndarray]) -> bool:
    """Whether an entry scatter's indices, fed as a parameter, name one index twice."""
    numbers = {p.name: p.parameter_number for p in module.entry.parameters()}
    for instruction in module.entry.instructions:
        if instruction.opcode != "scatter" or instruction.operands[len(instruction.operands) // 2] not in numbers:
            continue
        indices = np.asarray(inputs[numbers[instruction.operands[len(instruction.operands) // 2]]])
        vector_dim = instruction.attributes.get("index_vector_dim", indices.ndim)
        rows = np.moveaxis(indices, vector_dim, -1).reshape(-1, indices.shape[vector_dim]) \
            if vector_dim < indices.ndim else indices.reshape(-1, 1)
        if len(np.unique(rows, axis=0)) < len(rows):
            return True
    return False


def _where(exc: Exception) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{Path(frame.filename).name}:{frame.lineno}"


def _worker(connection, memory_gib: float = 0) -> None:
    warnings.simplefilter("ignore")  # NaN and overflow warnings of random inputs are expected
    np.seterr(all="ignore")
    if memory_gib:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        job = connection.recv()
        if job is None:
            return
        try:
            connection.send(check(*job, kuiper_finished=lambda: connection.send(KUIPER_FINISHED)))
        except Exception as exc:  # noqa: BLE001 (this tool's own failure on one module; go on with the rest)
            connection.send(("tool error", f"{type(exc).__name__}: {exc} | {_where(exc)}"))


class Worker:
    """A process that checks modules one at a time; replaced when one hangs or kills it."""

    def __init__(self, memory_gib: float = 0):
        self.memory_gib = memory_gib
        self.start()

    def start(self):
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, self.memory_gib), daemon=True)
        self.process.start()

    def check(self, text: str, origin: str, limit: float, huge: bool = False) -> tuple[str, str]:
        self.connection.send((text, origin, huge))
        engine = "kuiper"
        try:
            while self.connection.poll(limit):
                answer = self.connection.recv()
                if answer != KUIPER_FINISHED:
                    return answer
                engine = "XLA"
            outcome = ("timeout", f"{engine} over {limit:.0f} s")
        except EOFError:
            self.process.join()
            died = f"the process died in {engine} (exit code {self.process.exitcode})"
            outcome = ("crash", died) if engine == "kuiper" else ("XLA crashes", died)
        self.process.kill()
        self.process.join()
        self.start()
        return outcome

    def stop(self):
        self.connection.send(None)
        self.process.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("xla", type=Path, help="a local XLA checkout (the directory holding xla/)")
    parser.add_argument("--show", type=int, default=100, help="modules to list per outcome (default 100)")
    parser.add_argument("--only", default="", help="only modules whose origin contains this text")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, help="seconds per module")
    parser.add_argument("--huge", action="store_true", help="run only the modules skipped as huge, in kuiper alone")
    parser.add_argument("--huge-memory", type=float, default=8.0, help="--huge: the worker's address space, GiB")
    args = parser.parse_args(argv)
    cases = [c for c in extract(args.xla)[0] if c.valid and args.only in c.origin]
    if not cases:
        print(f"no valid modules found under {args.xla}", file=sys.stderr)
        return 1
    worker = Worker(args.huge_memory if args.huge else 0)
    outcomes: dict[str, list[str]] = {}
    started = time.perf_counter()
    for number, case in enumerate(cases):
        if number % 100 == 0:
            print(f"{number}/{len(cases)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        outcome, detail = worker.check(case.text, case.origin, args.time_limit, args.huge)
        outcomes.setdefault(outcome, []).append(f"{case.origin}: {detail}" if detail else case.origin)
    worker.stop()
    counts = Counter({outcome: len(items) for outcome, items in outcomes.items()})
    listed = ("tool error", "disagree", "crash", "timeout", "kuiper fails at run time",
              "kuiper rejects the random inputs", "XLA crashes", "XLA fails")
    for outcome in [*listed, *sorted(o for o in outcomes if o.startswith(("unspecified", "XLA's result")))]:
        for item in outcomes.get(outcome, [])[: args.show]:
            print(f"{outcome}: {item[:300]}")
    refused = sum(n for o, n in counts.items() if o.startswith("kuiper refuses"))
    parse_failed = sum(n for o, n in counts.items() if o.startswith("parse"))
    print(f"\n{len(cases)} valid modules, {time.perf_counter() - started:.0f} s")
    for outcome, number in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {number:4d}  {outcome}")
    both = counts["agree"] + counts["disagree"]
    print(f"kuiper refuses {refused}, both ran {both}: {counts['agree']} agree, {counts['disagree']} disagree, "
          f"{counts['crash']} crashes, {parse_failed} do not parse")
    return 1 if counts["disagree"] or counts["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
