"""Reading HLO text from a file, or taking it as given."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import ModelFormatError
from .module import HloModule
from .parser import parse

SUFFIXES = (".hlo.txt", ".hlo")


# Leading blank space, ``// line`` and ``/* block */`` comments (XLA's lit files start with ``// RUN:``).
_LEADING_COMMENTS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
# How a module's text begins: the module header, or (XLA accepts it) a computation header.
_MODULE_START = re.compile(r"HloModule\b|ENTRY\b|%?[\w.\-]+\s*(?:\(|\{)")


def looks_like_hlo_text(value) -> bool:
    """True for HLO module text (after any leading comments), False for anything else, paths included."""
    if not isinstance(value, str):
        return False
    start = _LEADING_COMMENTS.match(value).end()
    return _MODULE_START.match(value, start) is not None


def read_module(path_or_text: str | os.PathLike) -> HloModule:
    """Parse HLO text given directly (see ``looks_like_hlo_text``) or read from a file."""
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
