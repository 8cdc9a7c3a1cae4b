"""ONNX's ai.onnx.ml ops with tensor semantics -> canonical ops: Binarizer (a comparison), ArrayFeatureExtractor
(IndexSelect along the last dim).

The ai.onnx.ml ops on strings, maps and sequences (LabelEncoder on strings, DictVectorizer, ZipMap ...) stay
refused: kuiper's values are numeric tensors.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

ML = "ai.onnx.ml"


def translate_binarizer(site: Site) -> list[OpNode]:
    """1 where x > threshold, else 0, in x's type."""
    emit = Emit(site)
    x, dtype = site.input(0), site.dtype(0)
    above = emit.compare("gt", x, emit.const(site.float_("threshold", 0.0), dtype))
    emit.convert(above, dtype, out=site.outputs[0])
    return emit.ops


def translate_array_feature_extractor(site: Site) -> list[OpNode]:
    """X[..., indices] with the indices flattened: (..., k); a 1-D X gives one row (1, k), as ONNX Runtime does."""
    shape = site.shape(0)
    if shape is None or not shape:
        raise site.error(f"X must have at least one dim, found {shape}")
    emit = Emit(site)
    dtype = site.dtype(0)
    indices = emit.op("Reshape", [emit.convert(site.input(1), "int64")], {"shape": [-1]}, dtype="int64")
    if len(shape) > 1:
        emit.op("IndexSelect", [site.input(0), indices], {"dim": len(shape) - 1}, dtype=dtype, out=site.outputs[0])
        return emit.ops
    picked = emit.op("IndexSelect", [site.input(0), indices], {"dim": 0}, dtype=dtype)
    emit.op("Reshape", [picked], {"shape": [1, -1]}, dtype=dtype, out=site.outputs[0])
    return emit.ops


TRANSLATORS = {f"{ML}:Binarizer": translate_binarizer,
               f"{ML}:ArrayFeatureExtractor": translate_array_feature_extractor}
