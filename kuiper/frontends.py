"""Frontends: what turns a model file into a ModelIR, and how ``kuiper.load`` picks one.

A frontend is a class registered through the ``kuiper_add_frontends`` hook
(built-ins use the same hook as third parties, as pytest's collectors do)::

    class MyFormat(kuiper.Frontend):
        name = "myformat"
        suffixes = (".my",)

        @classmethod
        def load(cls, path, **options) -> ModelIR: ...

``kuiper.load(path)`` asks every frontend whether it ``claims`` the path (by
default: the file name ends with one of its ``suffixes``); ``format=NAME``
skips the question.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from .errors import ModelFormatError, PluginError
from .model_ir import ModelIR


class Frontend:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    suffixes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def claims(cls, path: Path) -> bool:
        """True when this frontend reads ``path``; the default looks at the file name only."""
        return any(path.name.endswith(suffix) for suffix in cls.suffixes)

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        raise NotImplementedError(f"{cls.__qualname__}.load")


def frontend_for(path: str | os.PathLike, format: str | None = None) -> type[Frontend]:  # noqa: A002
    """The frontend named ``format``, else the one that claims ``path``."""
    from .plugins import frontend_registry

    registry = frontend_registry()
    if format is not None:
        registered = registry.get(format)
        if registered is None:
            raise PluginError(f"unknown model format {format!r}; installed formats: {', '.join(sorted(registry))}")
        return registered.obj
    path = Path(path)
    claimed = [registered.obj for registered in registry.values() if registered.obj.claims(path)]
    if not claimed:
        known = "; ".join(f"{name}: {', '.join(r.obj.suffixes) or 'by content'}" for name, r in sorted(registry.items()))
        raise ModelFormatError(f"{path}: no installed frontend reads this file (known formats: {known}; "
                               "pass format=NAME to choose one)")
    if len(claimed) > 1:
        names = ", ".join(cls.name for cls in claimed)
        raise ModelFormatError(f"{path}: several frontends claim this file ({names}); pass format=NAME to choose one")
    return claimed[0]


def load_ir(path: str | os.PathLike, format: str | None = None, **options) -> ModelIR:  # noqa: A002
    """Read a model file into a ModelIR through the frontend that claims it."""
    return frontend_for(path, format).load(Path(path), **options)
