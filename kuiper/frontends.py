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
skips the question.  A frontend whose format is text may also take the text
itself: ``claims_text`` recognises it and ``load_text`` reads it, so
``kuiper.load(hlo_text)`` works like ``kuiper.load("prog.hlo.txt")``.  Likewise a
frontend may read a model given as its content (bytes or a binary file object):
``claims_content`` recognises the bytes and ``load_content`` reads them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from .errors import ModelFormatError, PluginError
from .model_ir import ModelIR
from .plugins import frontend_registry


class Frontend:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    suffixes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def spellings(cls) -> dict[str, str]:
        """``{this format's op type: the canonical type it translates to}`` (PNNX's ``nn.ReLU``: ``ReLU``),
        so that a plugin registering a kernel or op under a format's spelling is told the canonical one."""
        return {}

    @classmethod
    def claims(cls, path: Path) -> bool:
        """True when this frontend reads ``path``; the default looks at the file name only."""
        return any(path.name.endswith(suffix) for suffix in cls.suffixes)

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        raise NotImplementedError(f"{cls.__qualname__}.load")

    @classmethod
    def claims_text(cls, text: str) -> bool:
        """True when ``text`` is a whole model in this format (the default: never)."""
        return False

    @classmethod
    def load_text(cls, text: str, **options) -> ModelIR:
        raise ModelFormatError(f"the {cls.name} frontend reads files only; give it a path")

    @classmethod
    def claims_content(cls, content: bytes) -> bool:
        """True when ``content`` (a model given as bytes) is in this format (the default: never)."""
        return False

    @classmethod
    def load_content(cls, content: bytes, name: str, **options) -> ModelIR:
        """Read a model given as bytes; ``name`` names it in messages."""
        raise ModelFormatError(f"{name}: the {cls.name} frontend reads files only, not a model's bytes; give it a path")

    @classmethod
    def claims_object(cls, value) -> bool:
        """True when ``value`` is a model object of this format in memory (an ``onnx.ModelProto``; default: never)."""
        return False

    @classmethod
    def load_object(cls, value, **options) -> ModelIR:
        raise ModelFormatError(f"the {cls.name} frontend reads no model objects; give it a path")


def frontend_for(path: str | os.PathLike, format: str | None = None) -> type[Frontend]:  # noqa: A002
    """The frontend named ``format``, else the one that claims ``path``."""
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


def text_frontend(source, format: str | None = None) -> type[Frontend] | None:  # noqa: A002
    """The frontend that reads ``source`` as model text, or None when ``source`` is a path.

    A string is text when it is not the name of an existing file and the frontend named
    by ``format`` (or, without one, some installed frontend) claims it as text.
    """
    if not isinstance(source, str) or _is_existing_path(source):
        return None
    if format is not None:
        chosen = frontend_for(source, format)
        return chosen if chosen.claims_text(source) else None
    for registered in frontend_registry().values():
        if registered.obj.claims_text(source):
            return registered.obj
    return None


def is_content(value) -> bool:
    """True for a model given as its content (bytes, or a readable file object), not as a path or text."""
    return isinstance(value, (bytes, bytearray, memoryview)) or callable(getattr(value, "read", None))


def read_content(source, what: str) -> tuple[bytes, str]:
    """``(content, name for messages)`` of bytes or a binary file object (read to its end)."""
    name = getattr(source, "name", None)
    name = name if isinstance(name, str) else f"<{what} in memory>"
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), name
    try:
        content = source.read()
    except OSError as exc:
        raise ModelFormatError(f"{name}: {what} cannot be read: {exc.strerror or exc}") from None
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise ModelFormatError(f"{name}: reading the {what} gave {type(content).__name__}, not bytes; "
                               "open it in binary mode, open(path, 'rb')")
    return bytes(content), name


def content_frontend(content: bytes, name: str, format: str | None = None) -> type[Frontend]:  # noqa: A002
    """The frontend named ``format``, else the one that claims ``content``."""
    if format is not None:
        return frontend_for(name, format)
    claimed = [registered.obj for registered in frontend_registry().values() if registered.obj.claims_content(content)]
    if len(claimed) != 1:
        found = "no installed frontend" if not claimed else "more than one frontend (" + ", ".join(c.name for c in claimed) + ")"
        raise ModelFormatError(f"{name}: {found} recognises these bytes as a model; pass format=NAME to choose one")
    return claimed[0]


def is_model_object(value) -> bool:
    """True for a model given as an object in memory: neither a path, nor text, nor content."""
    return not isinstance(value, (str, os.PathLike)) and not is_content(value)


def object_frontend(value, format: str | None = None) -> type[Frontend]:  # noqa: A002
    """The frontend named ``format``, else the one that claims the model object ``value``."""
    if format is not None:
        return frontend_for("", format)
    claimed = [registered.obj for registered in frontend_registry().values() if registered.obj.claims_object(value)]
    if len(claimed) != 1:
        found = "no installed frontend" if not claimed else "more than one frontend (" + ", ".join(c.name for c in claimed) + ")"
        raise ModelFormatError(f"{found} reads a model given as a {type(value).__name__} object; "
                               "give a file path, model text or bytes")
    return claimed[0]


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # text that is no file name: too long, or a NUL byte
        return False


def _is_existing_path(source: str) -> bool:
    try:
        return "\n" not in source and Path(source).exists()
    except (OSError, ValueError):  # too long for a file name, or a NUL byte
        return False


def read_model(source, format: str | None = None, **options) -> tuple[type[Frontend], ModelIR]:  # noqa: A002
    """The frontend that reads ``source`` (a file's path, model text, or a model's bytes or binary
    file object) and the ModelIR it reads."""
    if is_model_object(source):
        frontend = object_frontend(source, format)
        return frontend, frontend.load_object(source, **options)
    if is_content(source):
        content, name = read_content(source, "model")
        frontend = content_frontend(content, name, format)
        return frontend, frontend.load_content(content, name, **options)
    frontend = text_frontend(source, format)
    if frontend is not None:
        return frontend, frontend.load_text(source, **options)
    path = Path(source)
    if _is_folder(path):
        path = model_in_folder(path, format)
    frontend = frontend_for(path, format)
    return frontend, frontend.load(path, **options)


def model_in_folder(folder: Path, format: str | None = None) -> Path:  # noqa: A002
    """The one model file in ``folder`` that a frontend (the one named ``format``) claims.

    A pnnx export folder holds ``model.pnnx.param`` beside ``model.ncnn.param``: where several
    files are claimed, those with the longest matching suffix (``.pnnx.param`` over ``.param``)
    win, and a tie is an error naming them.
    """
    registry = frontend_registry()
    frontends = [registry[format].obj] if format in registry else [r.obj for r in registry.values()]
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:  # unreadable: no permission, or gone meanwhile
        raise ModelFormatError(f"{folder}: the folder cannot be read ({exc.strerror or exc})") from None
    matches: list[tuple[int, Path]] = []
    for path in entries:
        if not path.is_file():
            continue
        lengths = [len(suffix) for frontend in frontends for suffix in frontend.suffixes if path.name.endswith(suffix)]
        if lengths:
            matches.append((max(lengths), path))
    if not matches:
        raise ModelFormatError(f"{folder}: a folder with no model file an installed frontend reads; give the file")
    longest = max(length for length, _ in matches)
    chosen = [path for length, path in matches if length == longest]
    if len(chosen) > 1:
        names = ", ".join(path.name for path in chosen)
        raise ModelFormatError(f"{folder}: a folder with several model files ({names}); give the one to read")
    return chosen[0]


def load_ir(source, format: str | None = None, **options) -> ModelIR:  # noqa: A002
    """Read a model file, model text or a model's bytes (or binary file object) into a ModelIR."""
    return read_model(source, format, **options)[1]
