"""Typed op params, declared once per op class as data.

An op class lists its params, e.g. ``params = (Ints("shape"), Int("dim", low=0))``.
``Op`` reads each one from the node before ``setup()`` runs, converts and checks it
(type, length, range, choices), and stores it as ``self.<attr>`` (the key, unless
``attr`` names another attribute).  A bad value raises one error naming the node, the
param, what the file holds and what was expected: ``OperatorParamError`` for a value
of the wrong kind, ``UnsupportedOperatorError`` for a choice kuiper does not run.

A default is converted like a value from the file (``Ints("strides", length=2,
default=1)`` gives ``(1, 1)``); ``default=None`` makes a param optional: missing or
written as None, it is None.  The typed accessors of ``Op`` (``int_param`` ...)
read through these same kinds, for params whose reading depends on other params.

The kinds are duck-typed on the op: they call its ``param``, ``error`` and
``unsupported``, so they import nothing from ``base`` (which imports them).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..ir.dtypes import array_dtype

REQUIRED = object()  # a param with no default: missing is an error


class Param:
    """One named param: how to read it from a node and what it must be."""

    def __init__(self, key: str, default: Any = REQUIRED, *, attr: str | None = None):
        self.key = key
        self.default = default
        self.attr = attr or key

    def read(self, op) -> Any:
        value = op.param(self.key, self.default)
        if value is None and self.default is None:
            return None
        return self.convert(op, value)

    def convert(self, op, value: Any) -> Any:
        """The checked value, or raise through ``op.error``/``op.unsupported``."""
        return value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar(value: Any) -> Any:
    """A one-element list taken as its element (PNNX writes ``dim=(1)`` for ``dim=1``)."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _bound_words(low: float | None, high: float | None) -> str:
    if high is None:
        return {0: "non-negative", 1: "positive"}.get(low, f"at least {low}")
    if low is None:
        return f"at most {high}"
    return f"between {low} and {high}"


def _check_range(op, key: str, value, found, low, high) -> None:
    """``value`` (a number or a sequence of them) must lie in [low, high]; ``found`` is shown."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    if any((low is not None and v < low) or (high is not None and v > high) for v in values):
        raise op.error(f"param '{key}' must be {_bound_words(low, high)}, found {found}")


class Int(Param):
    """An integer (a one-element list is taken as its element), within [low, high] when given."""

    def __init__(self, key: str, default: Any = REQUIRED, *, low: int | None = None, high: int | None = None,
                 attr: str | None = None):
        super().__init__(key, default, attr=attr)
        self.low, self.high = low, high

    def convert(self, op, value: Any) -> int:
        value = _scalar(value)
        if not _is_int(value):
            raise op.error(f"param '{self.key}' must be an integer, found {value!r}")
        _check_range(op, self.key, value, value, self.low, self.high)
        return value


class Float(Param):
    """A number, as a float, at least ``low`` when given."""

    def __init__(self, key: str, default: Any = REQUIRED, *, low: float | None = None, attr: str | None = None):
        super().__init__(key, default, attr=attr)
        self.low = low

    def convert(self, op, value: Any) -> float:
        value = _scalar(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise op.error(f"param '{self.key}' must be a number, found {value!r}")
        _check_range(op, self.key, value, value, self.low, None)
        return float(value)


class Bool(Param):
    """True or False; old PNNX files write bools as 0/1."""

    def convert(self, op, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if _is_int(value) and value in (0, 1):
            return bool(value)
        raise op.error(f"param '{self.key}' must be True or False, found {value!r}")


class Str(Param):
    """A name (a string)."""

    def convert(self, op, value: Any) -> str:
        if not isinstance(value, str):
            raise op.error(f"param '{self.key}' must be a name, found {value!r}")
        return value


class DType(Param):
    """A dtype name, as the backend's dtype object (NumPy's names and ml_dtypes' bfloat16, float8_* ...)."""

    def convert(self, op, value: Any) -> Any:
        dtype = array_dtype(op.xp, value) if isinstance(value, str) else None
        if dtype is None:
            raise op.unsupported(self.key, value, "a dtype name (NumPy's, or ml_dtypes' for bfloat16, float8 ...)")
        return dtype


class Choice(Param):
    """One of ``options``; anything else is unsupported (not malformed): kuiper may learn it later."""

    def __init__(self, key: str, options: Sequence[Any], default: Any = REQUIRED, *, attr: str | None = None):
        super().__init__(key, default, attr=attr)
        self.options = tuple(options)

    def read(self, op) -> Any:
        return self.convert(op, op.param(self.key, self.default))  # None may be one of the options

    def convert(self, op, value: Any) -> Any:
        if value not in self.options:
            raise op.unsupported(self.key, value, self.options)
        return value


class Ints(Param):
    """An int or a list of ints, as a tuple.

    ``length``: how many values (a single int, or a list of one, is repeated to it, like
    PyTorch's ``_pair``); an int, or the attribute of a param read before this one (listed
    earlier) whose length this one must have.  ``low``/``high`` bound every value.
    """

    def __init__(self, key: str, default: Any = REQUIRED, *, length: int | str | None = None,
                 low: int | None = None, high: int | None = None, attr: str | None = None):
        super().__init__(key, default, attr=attr)
        self.length, self.low, self.high = length, low, high

    def convert(self, op, value: Any) -> tuple[int, ...]:
        length = len(getattr(op, self.length)) if isinstance(self.length, str) else self.length
        if _is_int(value):
            value = [value] * (length or 1)
        if not isinstance(value, (list, tuple)) or not all(_is_int(v) for v in value):
            raise op.error(f"param '{self.key}' must be a list of integers, found {value!r}")
        if length is not None:
            if len(value) == 1:
                value = list(value) * length
            if len(value) != length:
                raise op.error(f"param '{self.key}' must have {length} value(s), found {value!r}")
        _check_range(op, self.key, value, list(value), self.low, self.high)
        return tuple(value)
