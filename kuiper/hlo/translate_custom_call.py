"""custom-call targets that plugins register (the ``kuiper_add_custom_calls`` hook).

A custom call runs code XLA links in by name; kuiper runs it only when a plugin says what the
target means: as an op type (operands and results in order, params ``target`` and
``backend_config``) or as a translator of its own. kuiper's own targets (TopK) are ordinary
translators (translators.py).
"""

from __future__ import annotations

from ..model_ir import OpNode
from ..plugins import custom_call_registry
from .module import HloInstruction
from .site import Site, Translator


def target(instruction: HloInstruction) -> str:
    return str(instruction.attributes.get("custom_call_target", ""))


def registered_translator(instruction: HloInstruction) -> Translator | None:
    """The translator a plugin registers for this custom call's target, or None."""
    if instruction.opcode != "custom-call":
        return None
    registered = custom_call_registry().get(target(instruction))
    if registered is None:
        return None
    translation = registered.obj
    if callable(translation):
        return translation
    return lambda site: _as_op(site, str(translation))


def _as_op(site: Site, op_type: str) -> list[OpNode]:
    params = {"target": target(site.instruction),
              "backend_config": str(site.instruction.attributes.get("backend_config", ""))}
    return [site.op(op_type, site.inputs, site.outputs, params)]
