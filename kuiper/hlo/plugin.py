"""kuiper's HLO support as a built-in plugin: the HLO frontend (its instructions become canonical ops).

Plugin discovery imports this module for every ``kuiper.load``, whatever the format, so the HLO
reader (lexer, parser, verifier, translators: about 25 ms) is imported inside the methods that
read HLO, on first use, and not at the top of this module.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..frontends import Frontend
from ..hookspecs import hookimpl
from ..model_ir import ModelIR


class HloFrontend(Frontend):
    name = "hlo"
    description = "XLA HLO text, as JAX (jit(f).lower(...).as_text()) or TensorFlow dump it"
    suffixes = (".hlo.txt", ".hlo")

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        _no_options(options)
        return _read(path)

    @classmethod
    def claims_text(cls, text: str) -> bool:
        from .files import looks_like_hlo_text  # the reader, on first use (see the module docstring)

        return looks_like_hlo_text(text)

    @classmethod
    def load_text(cls, text: str, **options) -> ModelIR:
        _no_options(options)
        return _read(text)


def _read(path_or_text) -> ModelIR:
    """Parse HLO text (or the file it names) and translate its ENTRY computation."""
    from .files import read_module  # the reader, on first use (see the module docstring)
    from .lower import lower_entry

    return lower_entry(read_module(path_or_text))


def _no_options(options: dict) -> None:
    if options:
        raise UsageError(f"the HLO frontend takes no options, got {', '.join(sorted(options))}")


@hookimpl
def kuiper_add_frontends():
    return [HloFrontend]
