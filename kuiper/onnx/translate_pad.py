"""ONNX Pad -> the canonical PadWithMode (constant, reflect, edge as replicate, wrap as circular)."""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site

PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def translate_pad(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    mode = site.string("mode", "constant")
    if mode not in PAD_MODES:
        raise site.error(f"mode={mode!r} is not one of {', '.join(PAD_MODES)}")
    pads = site.constant_ints(1, "pads") if site.opset >= 11 else site.ints("pads")
    axes = site.constant_ints(3, "axes") if site.has_input(3) else list(range(rank))
    axes = [a % rank for a in axes]
    if len(pads) != 2 * len(axes):
        raise site.error(f"pads {pads} must give a begin and an end for each of the {len(axes)} axes")
    before, after = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[i + len(axes)]
    torch_order = [amount for axis in reversed(range(rank)) for amount in (before[axis], after[axis])]
    value = 0.0
    if site.opset >= 11 and site.has_input(2):
        value = float(site.constant(2, "constant_value").reshape(-1)[0])
    elif site.opset < 11:
        value = site.float_("value", 0.0)
    params = {"pad": torch_order, "mode": PAD_MODES[mode], "value": value}
    return [site.op("PadWithMode", [site.input(0)], site.outputs, params)]


TRANSLATORS = {"Pad": translate_pad}
