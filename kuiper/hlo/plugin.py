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
    def load(cls, path: Path, constants=None, **options) -> ModelIR:
        _no_options(options)
        return _read(path, constants)

    @classmethod
    def claims_text(cls, text: str) -> bool:
        from .files import looks_like_hlo_text  # the reader, on first use (see the module docstring)

        return looks_like_hlo_text(text)

    @classmethod
    def load_text(cls, text: str, constants=None, **options) -> ModelIR:
        _no_options(options)
        return _read(text, constants)


def _read(path_or_text, constants=None) -> ModelIR:
    """Parse HLO text (or the file it names) and translate its ENTRY computation, with the parameters
    ``constants`` names ({number or name: array}) bound to those arrays (bind.py)."""
    from .bind import bind_parameters  # the reader, on first use (see the module docstring)
    from .files import read_module
    from .lower import lower_entry

    module = read_module(path_or_text)
    return lower_entry(bind_parameters(module, constants) if constants else module)


def _no_options(options: dict) -> None:
    if options:
        raise UsageError(f"the HLO frontend takes only the option 'constants', got {', '.join(sorted(options))}")


@hookimpl
def kuiper_add_frontends():
    return [HloFrontend]
