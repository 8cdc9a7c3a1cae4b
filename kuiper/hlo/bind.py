"""Binding ENTRY parameters to arrays: JAX's weights-as-arguments, made constants once, at load time.

JAX passes a model's weights as arguments of the jitted function, so its HLO has them as ENTRY
parameters, and every call would hand them over again and have them prepared again (a
convolution's weight reordered for oneDNN, a dense layer's transposed), which made a small conv
net 3.1x PyTorch's time where the same program with constant weights took 0.99x.  Bound at load
(``kuiper.load_hlo(text, constants={1: w1, "b": b})``), a parameter becomes a constant
instruction holding the array, and the translators see a weight known at load time, exactly as
when JAX inlines it: the Model's inputs are the parameters left.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from ..errors import InputError
from ..ir import dtypes
from .module import HloModule


def bind_parameters(module: HloModule, constants: Mapping[Any, Any]) -> HloModule:
    """``module`` with the ENTRY parameters named in ``constants`` (by number or by name) replaced by
    constant instructions holding those arrays, checked against the parameters' shapes and types."""
    entry = module.entry
    parameters = entry.parameters()
    by_key = {p.parameter_number: p for p in parameters} | {p.name: p for p in parameters}
    replaced = {}
    for key, value in constants.items():
        parameter = by_key.get(key)
        if parameter is None:
            names = ", ".join(f"{p.parameter_number} ({p.name}: {p.shape})" for p in parameters)
            raise InputError(f"{module.source or 'HLO module'}: constants={{{key!r}: ...}} names no ENTRY parameter; "
                             f"the parameters are {names}")
        replaced[parameter.name] = dataclasses.replace(parameter, opcode="constant",
                                                      literal=_checked(value, parameter, module),
                                                      parameter_number=None)
    instructions = [replaced.get(i.name, i) for i in entry.instructions]
    left = sorted((i for i in instructions if i.opcode == "parameter"), key=lambda i: i.parameter_number)
    renumbered = {i.name: dataclasses.replace(i, parameter_number=number) for number, i in enumerate(left)}
    instructions = [renumbered.get(i.name, i) for i in instructions]
    bound_entry = dataclasses.replace(entry, instructions=instructions, parameter_shapes=None)
    computations = {name: bound_entry if name == entry.name else computation
                    for name, computation in module.computations.items()}
    return dataclasses.replace(module, computations=computations)


def _checked(value, parameter, module) -> np.ndarray:
    """``value`` as an array of the parameter's shape and element type; a copy the caller cannot change."""
    where = f"{module.source or 'HLO module'}: constant for parameter {parameter.parameter_number} ({parameter.name})"
    shape = parameter.shape
    if shape.is_tuple or shape.dtype is None:
        raise InputError(f"{where}: only array parameters can be bound, this one is {shape}")
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise InputError(f"{where}: expected an array of {shape}, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape.dims):
        raise InputError(f"{where}: expected shape {tuple(shape.dims)} ({shape}), got {tuple(value.shape)}")
    if dtypes.name_of(value.dtype) != shape.dtype:
        raise InputError(f"{where}: expected element type {shape.dtype} ({shape}), got {value.dtype}")
    return np.array(value, copy=True)
