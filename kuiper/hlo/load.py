"""``kuiper.load_hlo``: HLO text (a file, or the text itself) -> a Model on one backend."""

from __future__ import annotations

import os

from ..backends import get_backend
from ..graph import Model, build
from ..graph.model import Origin
from .files import looks_like_hlo_text, read_module
from .lower import lower_entry


def load_hlo(path_or_text: str | os.PathLike, backend=None, fuse: bool = True) -> Model:
    """Build the module's ENTRY computation: inputs are its parameters in order, outputs the root's leaves."""
    import kuiper

    resolved = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    model = build(lower_entry(read_module(path_or_text)), backend=resolved, fuse=fuse)
    source = path_or_text if looks_like_hlo_text(path_or_text) else os.fspath(path_or_text)
    model.origin = Origin(kuiper.load_hlo, {"path_or_text": source, "backend": model.backend.name, "fuse": fuse})
    return model
