"""kuiper's HLO support as a built-in plugin: the HLO frontend (its instructions become canonical ops)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..frontends import Frontend
from ..hookspecs import hookimpl
from ..model_ir import ModelIR
from .files import looks_like_hlo_text, read_module
from .lower import lower_entry


class HloFrontend(Frontend):
    name = "hlo"
    description = "XLA HLO text, as JAX (jit(f).lower(...).as_text()) or TensorFlow dump it"
    suffixes = (".hlo.txt", ".hlo")

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        _no_options(options)
        return lower_entry(read_module(path))

    @classmethod
    def claims_text(cls, text: str) -> bool:
        return looks_like_hlo_text(text)

    @classmethod
    def load_text(cls, text: str, **options) -> ModelIR:
        _no_options(options)
        return lower_entry(read_module(text))


def _no_options(options: dict) -> None:
    if options:
        raise UsageError(f"the HLO frontend takes no options, got {', '.join(sorted(options))}")


@hookimpl
def kuiper_add_frontends():
    return [HloFrontend]
