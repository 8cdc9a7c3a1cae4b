"""ONNX ``Constant`` (a tensor or a number held in an attribute) -> the canonical ``Constant`` op."""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .site import Site

# Constant's attributes other than ``value`` (opset 12 on), and the dtype each gives.
_SCALARS = {"value_float": "float32", "value_floats": "float32", "value_int": "int64", "value_ints": "int64"}


def translate_constant(site: Site) -> list[OpNode]:
    given = [attribute.name for attribute in site.node.attribute]
    if len(given) != 1:
        raise site.error(f"expects exactly one value attribute, found {given or 'none'}")
    key = given[0]
    if key == "value":
        value = site.tensor("value")
    elif key in ("value_float", "value_int"):
        value = np.asarray(site.float_(key) if key == "value_float" else site.int_(key), dtype=_SCALARS[key])
    elif key in ("value_floats", "value_ints"):
        value = np.asarray(site.floats(key) if key == "value_floats" else site.ints(key), dtype=_SCALARS[key])
    else:
        raise site.error(f"attribute '{key}' is not supported (strings and sparse tensors are not)")
    output = site.outputs[0]
    site.values.know(output, value)
    return [site.op("Constant", [], [output], {}, {"data": value})]


TRANSLATORS = {"Constant": translate_constant}
