"""Where the backend choice, and the folder for kuiper's caches, come from.

Backend precedence, first match wins:

1. the ``backend=`` argument (or ``--backend`` on the command line),
2. the ``KUIPER_BACKEND`` environment variable,
3. a config file found in the working directory or one of its parents:
   ``kuiper.toml`` (``backend = "cupy"``) or ``pyproject.toml``
   (``[tool.kuiper]`` table, ``backend = "cupy"``),
4. ``numpy``.

Caches (numba's compiled kernels) live in ``KUIPER_CACHE_DIR``, else the user's cache
directory (``platformdirs.user_cache_dir("kuiper")``: ``~/.cache/kuiper`` on Linux), never
inside the installed package.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ENV_VAR = "KUIPER_BACKEND"
DEFAULT_BACKEND = "numpy"
CACHE_DIR_ENV = "KUIPER_CACHE_DIR"
# Every key a config file may set (``memory_budget``, ``loop_budget``, ``loop_time_budget``:
# kuiper.limits).  Any other key is an error, so a misspelt ``backnd = "cupy"`` is not silently ignored.
KNOWN_KEYS = ("backend", "memory_budget", "loop_budget", "loop_time_budget")


_SWITCHES = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}


def switch_from_env(name: str, default: bool) -> bool:
    """An on/off environment variable (KUIPER_NUMBA, KUIPER_DISABLE_PLUGIN_AUTOLOAD): 1, on, true,
    yes or 0, off, false, no in any case; unset or empty gives ``default``; anything else is an error
    rather than a guess."""
    text = os.environ.get(name, "")
    if not text.strip():
        return default
    value = _SWITCHES.get(text.strip().lower())
    if value is None:
        raise ConfigError(f"{name}={text!r}: expected 1 (or on, true, yes) or 0 (or off, false, no)")
    return value


@dataclass(frozen=True)
class BackendChoice:
    name: str
    source: str  # for messages: "argument", "environment variable KUIPER_BACKEND", a file path, "default"


def _read_config_table(path: Path) -> dict | None:
    """The kuiper table of a config file: all of kuiper.toml, or [tool.kuiper] of pyproject.toml."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read kuiper configuration ({exc})") from None
    table = data if path.name == "kuiper.toml" else data.get("tool", {}).get("kuiper")
    if not isinstance(table, dict):
        return None
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        where = "" if path.name == "kuiper.toml" else " [tool.kuiper]"
        raise ConfigError(f"{path}{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                          f"kuiper reads {', '.join(map(repr, KNOWN_KEYS))}")
    return table


def find_config_value(key: str, start: Path | None = None) -> tuple[object, str] | None:
    """``(value, file path)`` of ``key`` in the nearest config file that sets it, else None."""
    directory = (start or Path.cwd()).resolve()
    for folder in (directory, *directory.parents):
        for filename in ("kuiper.toml", "pyproject.toml"):
            path = folder / filename
            if path.is_file():
                table = _read_config_table(path)
                if table is not None and key in table:
                    return table[key], str(path)
    return None


def find_config_backend(start: Path | None = None) -> BackendChoice | None:
    found = find_config_value("backend", start)
    if found is None:
        return None
    value, path = found
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: 'backend' must be a backend name string, found {value!r}")
    return BackendChoice(value, path)


def choose_backend(explicit: str | None = None, start: Path | None = None) -> BackendChoice:
    if explicit:
        return BackendChoice(explicit, "argument")
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        return BackendChoice(from_env, f"environment variable {ENV_VAR}")
    return find_config_backend(start) or BackendChoice(DEFAULT_BACKEND, "default")


def cache_dir() -> Path:
    """The folder for files kuiper can rebuild: ``KUIPER_CACHE_DIR``, else the user's cache directory.

    Not the package folder: an installed package may be read-only, and pip removes an
    installation by its file list, so a cache written there is left behind as a stray folder
    that later shadows another install of kuiper.
    """
    from_env = os.environ.get(CACHE_DIR_ENV, "").strip()
    return Path(from_env).expanduser() if from_env else Path(platformdirs.user_cache_dir("kuiper"))
