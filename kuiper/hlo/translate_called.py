"""Reading instructions that call computations: the computation, a reducer, a window.

A called computation becomes a sub-graph param (a ModelIR that the graph builder builds),
or, when it is one binary op of its two parameters, a reducer name that runs as an array
reduction.
"""

from __future__ import annotations

from typing import Any

from ..model_ir import ModelIR
from .module import HloComputation
from .site import Site
from .translate_common import attribute
from .windows import parse_window

# HLO opcode of a one-op reducer -> the reducer name of kuiper's ops (kuiper/ops/reducers.py).
REDUCER_NAMES = {"add": "add", "multiply": "mul", "maximum": "max", "minimum": "min", "and": "and", "or": "or"}


def flag(site: Site, key: str, default: bool = False) -> bool:
    value = attribute(site, key, default)
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    raise site.error(f"attribute '{key}' must be true or false, found {value!r}")


def called(site: Site, key: str) -> HloComputation:
    """The computation named by attribute ``key``."""
    name = attribute(site, key)
    if isinstance(name, list) and len(name) == 1:
        name = name[0]
    if not isinstance(name, str) or name not in site.module.computations:
        raise site.error(f"attribute '{key}' must name a computation, found {name!r}")
    return site.module.computations[name]


def binary_root_opcode(computation: HloComputation) -> str | None:
    """The opcode when ``computation`` is just ``ROOT op(parameter(0), parameter(1))``, else None."""
    root = computation.root
    parameters = computation.parameters()
    if len(parameters) != 2 or len(root.operands) != 2 or root.shape.is_tuple:
        return None
    sources = [computation.by_name[o] for o in root.operands]
    if any(s.opcode != "parameter" for s in sources) or {s.parameter_number for s in sources} != {0, 1}:
        return None
    return root.opcode


def reducer(site: Site, key: str, operand_count: int = 1) -> str | ModelIR:
    """The reducer of attribute ``key``: a name when it is one known binary op, else a sub-graph."""
    computation = called(site, key)
    name = REDUCER_NAMES.get(binary_root_opcode(computation))
    if operand_count == 1 and name is not None:
        return name
    return site.subgraph(computation, vectorized=True)


def window(site: Site, rank: int) -> dict[str, Any]:
    """``window={size=3x3 stride=2x2 pad=1_1x0_0 lhs_dilate=1x1 rhs_dilate=2x2}`` as the params
    of kuiper's windowed ops (``window``, ``strides``, ``padding``, ``base_dilation``, ``window_dilation``)."""
    text = attribute(site, "window", {})
    fields = parse_window(text, rank, site.error)
    if any(fields["rhs_reversal"]):
        raise site.error("a reduction window cannot be reversed (rhs_reversal)")
    if not all(isinstance(p, tuple) and len(p) == 2 for p in fields["pad"]):
        raise site.error(f"window pad={text.get('pad')} must be low_high pairs")
    return {"window": fields["size"], "strides": fields["stride"], "padding": [list(p) for p in fields["pad"]],
            "base_dilation": fields["lhs_dilate"], "window_dilation": fields["rhs_dilate"]}
