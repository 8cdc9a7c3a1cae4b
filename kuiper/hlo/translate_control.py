"""HLO while and conditional -> While and If, their computations as sub-graphs.

A computation's parameter may be a tuple: lowered, its leaves are the sub-graph's inputs,
in the order the caller's operand leaves come.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_called import called
from .translate_common import attribute


def translate_while(site: Site) -> list[OpNode]:
    """The state's shape must be what the body takes and returns and what the condition takes (as XLA checks)."""
    condition, body = called(site, "condition"), called(site, "body")
    state = _signature(site.instruction.shape)
    for what, shape in (("the operand", site.operand_shape(0)), ("the body's result", body.root.shape),
                        *_parameter_shapes("the body", body), *_parameter_shapes("the condition", condition)):
        if _signature(shape) != state:
            raise site.error(f"{what} has shape {shape}, the loop's state is {site.instruction.shape}")
    root = condition.root.shape
    if root.is_tuple or root.element_type != "pred" or root.rank != 0:
        raise site.error(f"the condition must return pred[], it returns {root}")
    params = {"condition": site.subgraph(condition), "body": site.subgraph(body)}
    return [site.op("While", site.inputs, site.outputs, params)]


def _parameter_shapes(what: str, computation) -> list:
    parameters = computation.parameters()
    if len(parameters) != 1:
        return [(f"{what} takes {len(parameters)} parameters, not one state, and", computation.root.shape)]
    return [(f"{what}'s parameter", parameters[0].shape)]


def _signature(shape) -> list:
    """Element types and dims of every leaf: the shape without its layout."""
    return [(leaf.element_type, leaf.dims) for leaf in shape.leaves()]


def translate_conditional(site: Site) -> list[OpNode]:
    """``conditional(pred, t, f)`` with true/false computations, or ``conditional(index, ...)`` with branches."""
    if "branch_computations" in site.instruction.attributes:
        names = attribute(site, "branch_computations")
        if not isinstance(names, list) or not names or not all(n in site.module.computations for n in names):
            raise site.error(f"branch_computations={names!r} must list computations")
        computations = [site.module.computations[name] for name in names]
    else:
        computations = [called(site, "true_computation"), called(site, "false_computation")]
    counts = site.operand_leaf_counts
    if len(counts) != len(computations) + 1 or counts[0] != 1:
        raise site.error(f"has {len(counts) - 1} branch operand(s) for {len(computations)} branch(es)")
    selector = "pred" if site.operand_shape(0).element_type == "pred" else "index"
    params = {"selector": selector, "branches": [site.subgraph(c) for c in computations],
              "branch_input_counts": list(counts[1:])}
    return [site.op("If", site.inputs, site.outputs, params)]


TRANSLATORS = {"while": translate_while, "conditional": translate_conditional}
