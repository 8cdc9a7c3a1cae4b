"""The size budget: the largest single tensor kuiper will allocate.

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

Values are bytes, or a number with a unit: ``512MiB``, ``8GiB``, ``2GB``, ``1TiB``.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache
from pathlib import Path

from .errors import ConfigError, SizeLimitError

ENV_VAR = "KUIPER_MEMORY_BUDGET"
CONFIG_KEY = "memory_budget"
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")


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


def default_budget() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 4 * 2**30
    return physical // 4 if physical > 0 else 4 * 2**30


@lru_cache(maxsize=8)
def _configured_budget(env_value: str, directory: str) -> int:
    if env_value.strip():
        return parse_size(env_value.strip(), f"environment variable {ENV_VAR}")
    from .config import find_config_value

    found = find_config_value(CONFIG_KEY, Path(directory))
    if found is not None:
        value, path = found
        return parse_size(value, f"{path}: '{CONFIG_KEY}'")
    return default_budget()


def budget_bytes() -> int:
    """The current budget: the environment variable is read on every call, a config file once per directory."""
    try:
        directory = os.getcwd()
    except OSError:
        directory = "/"
    return _configured_budget(os.environ.get(ENV_VAR, ""), directory)


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
    (dim 0 of the input; never scaled down), so a batch of 10^6 on a CNN fails here,
    before the first op, and so does a file declaring an operand larger than the budget.
    """
    estimates = getattr(model, "_size_estimates", None)
    if estimates is None:
        estimates = model._size_estimates = _declared_sizes(model)
    largest_bytes, largest_name = estimates
    if not largest_bytes:
        return
    scale, reason = 1.0, ""
    for spec, array in zip(model.inputs, arrays):
        shape = getattr(array, "shape", ())
        declared_batch = spec.shape[0] if spec.shape and spec.shape[0] else 1
        if shape and shape[0] / declared_batch > scale:
            scale = shape[0] / declared_batch
            reason = f"input '{spec.name}' has batch {shape[0]} (declared {declared_batch}); "
    needed = math.ceil(largest_bytes * scale)
    budget = budget_bytes()
    if needed > budget:
        raise SizeLimitError(
            f"{model.source or 'model'}: {reason}operand '{largest_name}' would need about {_human(needed)}, "
            f"over the size budget of {_human(budget)} (use a smaller batch, or raise {ENV_VAR})"
        )


def _declared_sizes(model) -> tuple[int, str]:
    """(bytes, operand name) of the largest operand whose declared shape is fully known."""
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
    return largest, name


def _human(size: int) -> str:
    if size.bit_length() > 80:
        return f"about 2^{size.bit_length() - 1} bytes"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"
