"""ONNX NonMaxSuppression -> the canonical NonMaxSuppression (kuiper/ops/detection.py).

The optional inputs get ONNX's defaults as constants: no ``max_output_boxes_per_class`` keeps no box,
no ``iou_threshold`` is 0; no ``score_threshold`` keeps every score (the canonical op's fifth input left out).
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def translate_non_max_suppression(site: Site) -> list[OpNode]:
    center_point_box = site.int_("center_point_box", 0)
    if center_point_box not in (0, 1):
        raise site.error(f"center_point_box must be 0 or 1, found {center_point_box}")
    emit = Emit(site)
    limit = emit.convert(site.input(2), "int64") if site.has_input(2) else emit.const(0, "int64")
    threshold = site.input(3) if site.has_input(3) else emit.const(0.0, site.dtype(0))
    inputs = [site.input(0), site.input(1), limit, threshold]
    if site.has_input(4):
        inputs.append(site.input(4))
    emit.op("NonMaxSuppression", inputs, {"center_point_box": bool(center_point_box)}, dtype="int64",
            out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"NonMaxSuppression": translate_non_max_suppression}
