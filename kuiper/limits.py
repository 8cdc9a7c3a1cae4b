"""Budgets: the largest single tensor kuiper will allocate, the most iterations a loop may run,
the deepest expression a language accepts.

A model file can ask for absurd sizes (an upsample to 10^9 rows, a padding of
10^5 on each side, a batch of 10^6 fed to a CNN).  Ops call ``check_size``
with the shape they are about to allocate, and the model checks its feeds
against the shapes its file declares, so such requests fail with a clear
``SizeLimitError`` before any memory is taken, instead of a raw MemoryError
after the process has grown to many GiB.

The budget, first match wins:

1. the ``KUIPER_MEMORY_BUDGET`` environment variable,
2. ``memory_budget`` in ``kuiper.toml`` or ``[tool.kuiper]`` of ``pyproject.toml``,
3. a quarter of the machine's physical memory (4 GiB when that is unknown).

A model reads it once when a run begins (``budget_of_run``): its ops check each call against
that value, without the environment and working-directory reads (3 us) per check.

Values are bytes, or a number with a unit: ``512MiB``, ``8GiB``, ``2GB``, ``1TiB``.

The loop budget (``check_iterations``: an HLO ``while`` stops with a SizeLimitError
after that many iterations instead of spinning for hours) comes the same way from
``KUIPER_LOOP_BUDGET``, then ``loop_budget`` in the config file, then DEFAULT_LOOP_BUDGET.
The loop time budget (``loop_limits``, ``check_deadline``: the seconds a loop may run,
with every loop nested in it, since the outermost one began) comes from
``KUIPER_LOOP_TIME_BUDGET``, then ``loop_time_budget``, then DEFAULT_LOOP_TIME_BUDGET: an
iteration count alone does not bound the time of nested loops, or of a loop whose body is slow.
A while reads both through ``loop_limits``: once for the outermost loop of a nest, with one look at
the working directory, the loops nested in it taking what it read.

EXPRESSION_DEPTH is fixed: how deep the tensor-expression language nests brackets and
builds trees, so that no input overflows Python's stack in the recursive passes.
"""

from __future__ import annotations

import contextvars
import math
import os
import re
import time
from functools import cache, lru_cache
from pathlib import Path

from .errors import ConfigError, SizeLimitError

ENV_VAR = "KUIPER_MEMORY_BUDGET"
CONFIG_KEY = "memory_budget"
LOOP_ENV_VAR = "KUIPER_LOOP_BUDGET"
LOOP_CONFIG_KEY = "loop_budget"
# One million iterations: far more than any model's loop runs (a scan over a sequence, a
# fixed-point solver), reached in seconds to minutes; a runaway loop stops there.
DEFAULT_LOOP_BUDGET = 1_000_000
LOOP_TIME_ENV_VAR = "KUIPER_LOOP_TIME_BUDGET"
LOOP_TIME_CONFIG_KEY = "loop_time_budget"
# Ten minutes: far longer than a model's loops run (the iteration budget stops a plain loop of a
# cheap body in a minute or two), short enough that nested loops or a slow body cannot hold a
# process for hours.
DEFAULT_LOOP_TIME_BUDGET = 600.0
EXPRESSION_DEPTH = 256
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")
_SECONDS = {"": 1.0, "s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}


# Hand-written, not dask.utils.parse_bytes: dask is an optional extra, and this runs in every process (the budget).
def parse_size(text: str | int, where: str) -> int:
    """``"8GiB"`` -> 8589934592; ``where`` names the setting for the error message."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = _SIZE.fullmatch(str(text)) if isinstance(text, str) and len(text) < 40 else None
    unit = match and _UNITS.get(match.group(2).lower())
    if not match or unit is None or float(match.group(1)) <= 0:
        raise ConfigError(f"{where}: expected a positive size such as 4294967296, '512MiB' or '8GiB', found {text!r}")
    return int(float(match.group(1)) * unit)


@cache
def default_budget() -> int:
    """A quarter of the machine's memory (4 GiB where it cannot be told); read once, as it never changes,
    where two sysconf calls at every model call cost 1 us of a small model's 13."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 4 * 2**30
    return physical // 4 if physical > 0 else 4 * 2**30


def parse_count(text: str | int, where: str) -> int:
    """``"1000000"`` (or ``1_000_000``, or the integer) -> 1000000; ``where`` names the setting."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    digits = text.strip().replace("_", "") if isinstance(text, str) and len(text) < 40 else ""
    if not digits.isdigit() or int(digits) <= 0:
        raise ConfigError(f"{where}: expected a positive whole number such as 1000000, found {text!r}")
    return int(digits)


def parse_duration(text: str | int | float, where: str) -> float:
    """``"90s"``, ``"5min"``, ``"1h"``, ``"250ms"`` or a number of seconds -> seconds; ``where`` names the setting."""
    if isinstance(text, (int, float)) and not isinstance(text, bool) and math.isfinite(text) and text > 0:
        return float(text)
    match = _SIZE.fullmatch(str(text)) if isinstance(text, str) and len(text) < 40 else None
    unit = match and _SECONDS.get(match.group(2).lower())
    if not match or unit is None or float(match.group(1)) <= 0:
        raise ConfigError(f"{where}: expected a positive duration such as 600, '90s', '5min' or '1h', found {text!r}")
    return float(match.group(1)) * unit


@lru_cache(maxsize=16)
def _configured(env_var: str, key: str, env_value: str, directory: str) -> int | float | None:
    """The setting from the environment variable, else the nearest config file, else None."""
    parse = {CONFIG_KEY: parse_size, LOOP_TIME_CONFIG_KEY: parse_duration}.get(key, parse_count)
    if env_value.strip():
        return parse(env_value.strip(), f"environment variable {env_var}")
    from .config import find_config_value

    found = find_config_value(key, Path(directory))
    if found is not None:
        value, path = found
        return parse(value, f"{path}: '{key}'")
    return None


def _setting(env_var: str, key: str) -> int | None:
    """The environment variable is read on every call, a config file once per directory."""
    try:
        directory = os.getcwd()
    except OSError:
        directory = "/"
    return _configured(env_var, key, os.environ.get(env_var, ""), directory)


_budget_of_run: contextvars.ContextVar[int | None] = contextvars.ContextVar("kuiper_budget_of_run", default=None)


def budget_bytes() -> int:
    """The current memory budget: the one the running model read when its run began, else the setting now."""
    fixed = _budget_of_run.get()
    if fixed is not None:
        return fixed
    configured = _setting(ENV_VAR, CONFIG_KEY)
    return default_budget() if configured is None else configured


class budget_of_run:  # noqa: N801 - used as a function: ``with budget_of_run():``
    """Within: ``budget_bytes()`` is the budget read on entry (a model's run; a setting changed
    during the run applies from the next one).  A class, not a generator: entered on every call
    of every model, where contextlib's machinery cost 1.5 us."""

    def __enter__(self):
        self._token = _budget_of_run.set(budget_bytes())

    def __exit__(self, *exc_info):
        _budget_of_run.reset(self._token)


def loop_budget() -> int:
    """The current loop budget: the most iterations one loop may run."""
    configured = _setting(LOOP_ENV_VAR, LOOP_CONFIG_KEY)
    return DEFAULT_LOOP_BUDGET if configured is None else configured


def check_iterations(count: int, budget: int, what: str) -> None:
    """Raise SizeLimitError once a loop has run ``count`` > ``budget`` iterations; ``what`` names the loop."""
    if count > budget:
        raise SizeLimitError(
            f"{what}: the loop ran {budget} iterations without ending, the loop budget (raise it with "
            f"{LOOP_ENV_VAR} or '{LOOP_CONFIG_KEY}' in kuiper.toml if this is intended)"
        )


def loop_time_budget() -> float:
    """The current loop time budget: the most seconds a loop, with the loops nested in it, may run."""
    configured = _setting(LOOP_TIME_ENV_VAR, LOOP_TIME_CONFIG_KEY)
    return DEFAULT_LOOP_TIME_BUDGET if configured is None else configured


_loop_nest: contextvars.ContextVar[tuple[int, float] | None] = contextvars.ContextVar("kuiper_loop_nest",
                                                                                       default=None)


class loop_limits:  # noqa: N801 - used as a function: ``with loop_limits() as (budget, deadline):``
    """Within: (the loop budget, the loop deadline) of the running loop nest.  The outermost loop reads
    both settings, with one look at the working directory, and the loops nested in it take them as
    they are (reading the environment and the directory for each setting of each loop cost 4 us at
    every call of a model holding a while, twice that for one holding two).  The
    deadline is the outermost loop's start plus the loop time budget: the loops nested in it (a while
    in a while's body, in a branch or a reducer it calls) share it, so the budget bounds the whole
    nest, not each loop.  A setting changed while a nest runs applies from the next outermost loop,
    as the memory budget does from the next run."""

    def __enter__(self) -> tuple[int, float]:
        limits = _loop_nest.get()
        self._token = None
        if limits is None:
            try:
                directory = os.getcwd()
            except OSError:
                directory = "/"
            environ = os.environ
            budget = _configured(LOOP_ENV_VAR, LOOP_CONFIG_KEY, environ.get(LOOP_ENV_VAR, ""), directory)
            seconds = _configured(LOOP_TIME_ENV_VAR, LOOP_TIME_CONFIG_KEY, environ.get(LOOP_TIME_ENV_VAR, ""),
                                  directory)
            limits = ((DEFAULT_LOOP_BUDGET if budget is None else budget),
                      time.monotonic() + (DEFAULT_LOOP_TIME_BUDGET if seconds is None else seconds))
            self._token = _loop_nest.set(limits)
        return limits

    def __exit__(self, *exc_info):
        if self._token is not None:
            _loop_nest.reset(self._token)


def check_deadline(deadline: float, what: str) -> None:
    """Raise SizeLimitError once ``deadline`` (from ``loop_limits``) has passed; ``what`` names the loop."""
    if time.monotonic() > deadline:
        raise SizeLimitError(
            f"{what}: the loop ran past the loop time budget of {loop_time_budget():g} s without ending (raise "
            f"it with {LOOP_TIME_ENV_VAR} or '{LOOP_TIME_CONFIG_KEY}' in kuiper.toml if this is intended)"
        )


def nbytes(shape, itemsize: int) -> int:
    return math.prod(int(d) for d in shape) * itemsize


def check_size(shape, itemsize: int, what: str) -> None:
    """Raise SizeLimitError if one tensor of ``shape`` would exceed the budget; ``what`` says who asks."""
    size = nbytes(shape, itemsize)
    budget = budget_bytes()
    if size > budget:
        raise SizeLimitError(
            f"{what}: a tensor of shape {tuple(int(d) for d in shape)} needs {_human(size)}, over the size budget of "
            f"{_human(budget)} (raise it with {ENV_VAR} or '{CONFIG_KEY}' in kuiper.toml if this is intended)"
        )


def check_feeds(model, arrays) -> None:
    """Refuse a run whose feeds would make a declared operand exceed the budget.

    Each operand's declared size is scaled by the fed batch over the declared batch
    (dim 0 of the input as the file declared it, even where the frontend freed it; never
    scaled down), so a batch of 10^6 on a CNN fails here,
    before the first op, and so does a file declaring an operand larger than the budget.
    What depends on the model alone (the largest operand, each input's declared batch) is
    worked out on its first call: per call this is a loop over the feeds' first dims.
    """
    estimates = getattr(model, "_size_estimates", None)
    if estimates is None:
        estimates = model._size_estimates = _declared_sizes(model)
    largest_bytes, largest_name, batches = estimates
    if not largest_bytes:
        return
    scale, widest = 1.0, -1
    for position, (declared_batch, array) in enumerate(zip(batches, arrays)):
        shape = getattr(array, "shape", ())
        if shape and shape[0] / declared_batch > scale:
            scale, widest = shape[0] / declared_batch, position
    needed = math.ceil(largest_bytes * scale)
    budget = budget_bytes()
    if needed > budget:
        reason = ""
        if widest >= 0:
            reason = (f"input '{model.inputs[widest].name}' has batch {arrays[widest].shape[0]} "
                      f"(declared {batches[widest]}); ")
        raise SizeLimitError(
            f"{model.source or 'model'}: {reason}operand '{largest_name}' would need about {_human(needed)}, "
            f"over the size budget of {_human(budget)} (use a smaller batch, or raise {ENV_VAR})"
        )


def _traced_batch(info) -> int:
    """The batch an input with a freed dim 0 was declared with in the file (the other operands' shapes
    hold it), else 1."""
    batch = getattr(info, "traced_batch", None)
    return batch if isinstance(batch, int) and batch > 0 else 1


def _declared_sizes(model) -> tuple[int, str, tuple[int, ...]]:
    """(bytes, operand name) of the largest operand whose declared shape is fully known, and each
    input's declared batch (dim 0 as the file declared it, else as the other operands traced it)."""
    import numpy as np

    largest, name = 0, ""
    operands = model.ir.operands.values() if getattr(model, "ir", None) is not None else ()
    for info in operands:
        if not info.shape or any(d is None for d in info.shape):
            continue
        try:
            itemsize = np.dtype(info.dtype or "float32").itemsize
        except TypeError:
            itemsize = 4
        size = nbytes(info.shape, itemsize)
        if size > largest:
            largest, name = size, info.name
    declared = model.ir.operands if getattr(model, "ir", None) is not None else {}
    batches = tuple(spec.shape[0] if spec.shape and spec.shape[0] else _traced_batch(declared.get(spec.name))
                    for spec in model.inputs)
    return largest, name, batches


def _human(size: int) -> str:
    if size.bit_length() > 80:
        return f"about 2^{size.bit_length() - 1} bytes"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"
