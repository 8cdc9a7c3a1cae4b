"""ONNX op type -> translator into the canonical op set, gathered from the translate_* modules.

Keys are the op type for the default domain (``Conv``) and ``domain:op type`` for others
(``ai.onnx.ml:Binarizer``). UNSUPPORTED says why kuiper refuses the op types it knows but cannot run.
"""

from __future__ import annotations

from . import (
    translate_activation,
    translate_constant,
    translate_control,
    translate_detection,
    translate_conv,
    translate_elementwise,
    translate_math,
    translate_ml,
    translate_masks,
    translate_ngrams,
    translate_norm,
    translate_optimizer,
    translate_pad,
    translate_quantized,
    translate_recurrent,
    translate_reduce,
    translate_resize,
    translate_scatter,
    translate_selection,
    translate_shape,
    translate_spectral,
)
from .site import Site

TRANSLATORS: dict = {
    **translate_constant.TRANSLATORS,
    **translate_elementwise.TRANSLATORS,
    **translate_shape.TRANSLATORS,
    **translate_reduce.TRANSLATORS,
    **translate_activation.TRANSLATORS,
    **translate_conv.TRANSLATORS,
    **translate_control.TRANSLATORS,
    **translate_norm.TRANSLATORS,
    **translate_masks.TRANSLATORS,
    **translate_pad.TRANSLATORS,
    **translate_math.TRANSLATORS,
    **translate_resize.TRANSLATORS,
    **translate_recurrent.TRANSLATORS,
    **translate_quantized.TRANSLATORS,
    **translate_scatter.TRANSLATORS,
    **translate_spectral.TRANSLATORS,
    **translate_selection.TRANSLATORS,
    **translate_optimizer.TRANSLATORS,
    **translate_detection.TRANSLATORS,
    **translate_ml.TRANSLATORS,
    **translate_ngrams.TRANSLATORS,
}

_STRINGS = "it computes on strings; kuiper's tensors hold numbers"
_SEQUENCES = "it works on ONNX sequences; kuiper's values are tensors"
_OPTIONALS = "it works on ONNX optionals; kuiper's values are tensors"
_TRAINING = "it differentiates a graph (ai.onnx.preview.training); kuiper runs inference"
UNSUPPORTED: dict[str, str] = {
    **{op: _STRINGS for op in ("StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch")},
    **{op: _SEQUENCES for op in ("SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
                                 "SequenceInsert", "SequenceLength", "SequenceMap", "SplitToSequence",
                                 "ConcatFromSequence")},
    **{op: _OPTIONALS for op in ("Optional", "OptionalGetElement", "OptionalHasElement")},
    "ai.onnx.preview.training:Gradient": _TRAINING,
    "ImageDecoder": "it decodes image files (JPEG, PNG ...); kuiper takes decoded tensors",
    **{op: "it draws random numbers, from a generator ONNX leaves to each runtime; kuiper runs inference "
           "deterministically" for op in ("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike",
                                          "Multinomial", "Bernoulli")},
}


def translator_key(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


__all__ = ["TRANSLATORS", "UNSUPPORTED", "Site", "translator_key"]
