"""Helpers for the test suites of kuiper and of its plugins (import it from tests: it needs pytest).

One suite runs on every backend, each unavailable one skipped with the reason, as
array-api-compat's suites skip a missing array library: a plugin's tests say
``@pytest.mark.parametrize("backend", backend_params())`` and see CuPy results
wherever CuPy works, a skip naming the cause everywhere else.
"""

from __future__ import annotations

import pytest

from .backends import backend_infos


def backend_params() -> list:
    """One ``pytest.param`` per registered backend (its name, also as the test id); unavailable ones skip."""
    params = []
    for info in backend_infos():
        marks = [] if info.available else [pytest.mark.skip(reason=f"backend '{info.name}' unavailable: {info.reason}")]
        params.append(pytest.param(info.name, marks=marks, id=info.name))
    return params
