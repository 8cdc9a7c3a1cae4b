"""kuiper's HLO support as a built-in plugin: the HLO frontend and the HLO op families."""

from __future__ import annotations

from pathlib import Path

from ..frontends import Frontend
from ..hookspecs import hookimpl
from ..model_ir import ModelIR
from . import (
    ops_control,
    ops_gather,
    ops_reduce,
    ops_sort,
)

FAMILIES = [ops_reduce, ops_gather, ops_sort, ops_control]


class HloFrontend(Frontend):
    name = "hlo"
    description = "XLA HLO text, as JAX (jit(f).lower(...).as_text()) or TensorFlow dump it"
    suffixes = (".hlo.txt", ".hlo")

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        from .files import read_module
        from .lower import lower_entry

        if options:
            raise TypeError(f"the HLO frontend takes no options, got {sorted(options)}")
        return lower_entry(read_module(path))


@hookimpl
def kuiper_add_ops():
    return [op for family in FAMILIES for op in family.OPS]


@hookimpl
def kuiper_add_frontends():
    return [HloFrontend]
