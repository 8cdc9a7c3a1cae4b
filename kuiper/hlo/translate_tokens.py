"""Instructions that order work or mark boundaries, which one device runs in program order anyway.

A token (``token[]``) carries no data: kuiper holds it as an empty bool scalar. ``after-all``
makes one; ``add-dependency`` and ``domain`` return their operand (``opt-barrier`` passes its
tuple through: translate_shape.py). ``send``/``recv`` move data between devices and are refused
(see UNSUPPORTED in translators.py).
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .site import Site


def translate_after_all(site: Site) -> list[OpNode]:
    return [site.op("Constant", [], site.outputs, attrs={"data": np.zeros((), bool)})]


def translate_first_operand(site: Site) -> list[OpNode]:
    """add-dependency(value, token) and domain(value): the value."""
    if not site.inputs or site.operand_leaf_counts[0] != len(site.outputs):
        raise site.error(f"expects its first operand to have the result's shape {site.instruction.shape}")
    return [site.op("Identity", [source], [target], suffix=f"leaf{index}" if len(site.outputs) > 1 else "")
            for index, (source, target) in enumerate(zip(site.inputs, site.outputs))]


TRANSLATORS = {
    "after-all": translate_after_all,
    "add-dependency": translate_first_operand,
    "domain": translate_first_operand,
}
