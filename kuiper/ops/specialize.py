"""Guards for specialized forwards (``Op.specialized``): run a direct function on inputs like the first call's.

A specialized forward assumes what the first call saw: the array class and the dtype of each input,
sometimes a size limit.  ``guarded`` makes the function that checks exactly that with identity tests
(about 0.1 us per input: NumPy's builtin dtypes are singletons) and calls the op's ``forward`` for any
other inputs, so a specialized step is never wrong, only sometimes not faster.  Written out for one,
two and three inputs (a product and its bias), the common cases, because a loop over the inputs
costs more than the check (three inputs: 2.0 us looped, 0.7 written out).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


def guarded(direct: Callable, inputs: Sequence[Any], fallback: Callable, max_size: int | None = None) -> Callable:
    """``direct(*xs)`` when each ``xs[i]`` is of ``inputs[i]``'s class and dtype (and, with ``max_size``, of
    fewer elements than that), else ``fallback(*xs)``."""
    kinds = tuple(type(value) for value in inputs)
    dtypes = tuple(value.dtype for value in inputs)
    limit = max_size if max_size is not None else float("inf")
    if len(inputs) == 1:
        (kind,), (dtype,) = kinds, dtypes

        def one(x):
            if x.__class__ is kind and x.dtype is dtype and x.size < limit:
                return direct(x)
            return fallback(x)

        return one
    if len(inputs) == 2:
        (kind_a, kind_b), (dtype_a, dtype_b) = kinds, dtypes

        def two(a, b):
            if (a.__class__ is kind_a and b.__class__ is kind_b and a.dtype is dtype_a and b.dtype is dtype_b
                    and a.size < limit and b.size < limit):
                return direct(a, b)
            return fallback(a, b)

        return two
    if len(inputs) == 3:
        (kind_a, kind_b, kind_c), (dtype_a, dtype_b, dtype_c) = kinds, dtypes

        def three(a, b, c):
            if (a.__class__ is kind_a and b.__class__ is kind_b and c.__class__ is kind_c and a.dtype is dtype_a
                    and b.dtype is dtype_b and c.dtype is dtype_c and a.size < limit and b.size < limit
                    and c.size < limit):
                return direct(a, b, c)
            return fallback(a, b, c)

        return three
    expected = tuple(zip(kinds, dtypes))

    def many(*xs):
        if len(xs) == len(expected) and all(
            x.__class__ is kind and x.dtype is dtype and x.size < limit for x, (kind, dtype) in zip(xs, expected)
        ):
            return direct(*xs)
        return fallback(*xs)

    return many


def arrays_of(inputs: Sequence[Any], array_type) -> bool:
    """Whether every input is an instance of exactly ``array_type`` (not a subclass, not a scalar)."""
    return array_type is not None and all(value.__class__ is array_type for value in inputs)


def same_shapes(samples: Sequence[Any], direct: Callable, fallback: Callable) -> Callable | None:
    """``direct(*xs)`` while each input is of its sample's class, dtype and shape (what the op decided from
    the shapes holds: a resolved reshape, an index, the library a product chose), else ``fallback(*xs)``;
    None where a sample is not an array.  One, two and three inputs, the common cases, written out."""
    if not all(hasattr(sample, "shape") and hasattr(sample, "dtype") for sample in samples):
        return None
    kinds, dtypes, shapes = (tuple(type(s) for s in samples), tuple(s.dtype for s in samples),
                             tuple(s.shape for s in samples))
    if len(samples) == 1:
        (kind,), (dtype,), (shape,) = kinds, dtypes, shapes

        def one(x):
            if x.__class__ is kind and x.shape == shape and x.dtype is dtype:
                return direct(x)
            return fallback(x)

        return one
    if len(samples) == 2:
        (kind_a, kind_b), (dtype_a, dtype_b), (shape_a, shape_b) = kinds, dtypes, shapes

        def two(a, b):
            if (a.__class__ is kind_a and b.__class__ is kind_b and a.shape == shape_a and b.shape == shape_b
                    and a.dtype is dtype_a and b.dtype is dtype_b):
                return direct(a, b)
            return fallback(a, b)

        return two
    if len(samples) == 3:
        (kind_a, kind_b, kind_c), (dtype_a, dtype_b, dtype_c), (shape_a, shape_b, shape_c) = kinds, dtypes, shapes

        def three(a, b, c):
            if (a.__class__ is kind_a and b.__class__ is kind_b and c.__class__ is kind_c and a.shape == shape_a
                    and b.shape == shape_b and c.shape == shape_c and a.dtype is dtype_a and b.dtype is dtype_b
                    and c.dtype is dtype_c):
                return direct(a, b, c)
            return fallback(a, b, c)

        return three
    expected = tuple(zip(kinds, dtypes, shapes))

    def many(*xs):
        if len(xs) == len(expected) and all(
            x.__class__ is kind and x.dtype is dtype and x.shape == shape for x, (kind, dtype, shape) in zip(xs, expected)
        ):
            return direct(*xs)
        return fallback(*xs)

    return many


def same_shape(sample, direct: Callable, fallback: Callable) -> Callable | None:
    """``same_shapes`` for a one-input op whose direct function calls the array's own methods: None where
    ``sample`` has none (a Python scalar; an array-API namespace's array without ``reshape``), for which
    the op's own forward stays."""
    if not all(hasattr(sample, name) for name in ("reshape", "transpose")):
        return None
    return same_shapes([sample], direct, fallback)
