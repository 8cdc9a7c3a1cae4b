"""Opcode -> translator into the canonical op set, gathered from the translate_* modules.

kuiper/hlo has no ops of its own: an opcode without a translator is unsupported (a plugin adds
custom-call targets through ``kuiper_add_custom_calls``).  A custom call is keyed ``custom-call.<target>``.
UNSUPPORTED says why kuiper refuses the opcodes it knows but cannot run.
"""

from __future__ import annotations

from . import (
    translate_collectives,
    translate_control,
    translate_conv,
    translate_dot,
    translate_dynamic,
    translate_elementwise,
    translate_gather,
    translate_linalg,
    translate_random,
    translate_reduce,
    translate_shape,
    translate_sort,
    translate_tokens,
)
from .site import Translator

TRANSLATORS: dict[str, Translator] = {
    **translate_conv.TRANSLATORS,
    **translate_dot.TRANSLATORS,
    **translate_elementwise.TRANSLATORS,
    **translate_shape.TRANSLATORS,
    **translate_reduce.TRANSLATORS,
    **translate_gather.TRANSLATORS,
    **translate_sort.TRANSLATORS,
    **translate_control.TRANSLATORS,
    **translate_collectives.TRANSLATORS,
    **translate_tokens.TRANSLATORS,
    **translate_dynamic.TRANSLATORS,
    **translate_linalg.TRANSLATORS,
    **translate_random.TRANSLATORS,
}

_ANOTHER_DEVICE = "it moves data to or from another device or the host; kuiper runs a module on one device"
UNSUPPORTED: dict[str, str] = {
    **{opcode: _ANOTHER_DEVICE for opcode in ("send", "send-done", "recv", "recv-done", "infeed", "outfeed")},
    "ragged-all-to-all": "its ragged exchange of chunks between devices is not implemented",
    "rng-get-and-update-state": "it reads XLA's own generator state, which XLA's passes add and kuiper does not "
                                "keep",
}
