"""Reading HLO text from a file, or taking it as given."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelFormatError
from .module import HloModule
from .parser import parse

SUFFIXES = (".hlo.txt", ".hlo")


def looks_like_hlo_text(value) -> bool:
    return isinstance(value, str) and value.lstrip().startswith("HloModule")


def read_module(path_or_text: str | os.PathLike) -> HloModule:
    """Parse HLO text given directly (it starts with ``HloModule``) or read from a file."""
    if looks_like_hlo_text(path_or_text):
        return parse(path_or_text)
    path = Path(path_or_text)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: no such HLO file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{path}: cannot read it as HLO text: {exc}") from None
    return parse(text, source=str(path))
