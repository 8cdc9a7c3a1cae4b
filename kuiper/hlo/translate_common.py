"""What every translator reads from an instruction: typed attributes.

Each reader raises ``site.error`` naming the instruction and the attribute, so a malformed
program fails at load time with the line it came from.
"""

from __future__ import annotations

from typing import Any

from .site import Site

REQUIRED = object()


def attribute(site: Site, key: str, default: Any = REQUIRED) -> Any:
    attributes = site.instruction.attributes
    if key in attributes:
        return attributes[key]
    if default is REQUIRED:
        raise site.error(f"missing attribute '{key}'")
    return default


def ints(site: Site, key: str, default: Any = REQUIRED) -> tuple[int, ...]:
    """An attribute that is a list of integers, ``{1,2}`` (a single integer is a list of one)."""
    value = attribute(site, key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise site.error(f"attribute '{key}' must be a list of integers, found {value!r}")
    return tuple(value)


def integer(site: Site, key: str, default: Any = REQUIRED) -> int:
    value = attribute(site, key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise site.error(f"attribute '{key}' must be an integer, found {value!r}")
    return value


def word(site: Site, key: str, default: Any = REQUIRED) -> str:
    value = attribute(site, key, default)
    if not isinstance(value, str):
        raise site.error(f"attribute '{key}' must be a word, found {value!r}")
    return value
