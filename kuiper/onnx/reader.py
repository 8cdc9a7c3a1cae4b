"""Reading an ONNX model from a path, its bytes or a ModelProto, into a ModelIR."""

from __future__ import annotations

from pathlib import Path

from ..model_ir import ModelIR
from .lower import lower_model
from .protobuf import parse_model, read_model_file


def read_path(path: Path, known_inputs: dict | None = None) -> ModelIR:
    """A ``.onnx`` file; its external data must lie in its folder."""
    return lower_model(read_model_file(path), str(path), path.parent, known_inputs)


def read_bytes(content: bytes, name: str, known_inputs: dict | None = None) -> ModelIR:
    """A serialized ModelProto (without external data: there is no folder to read it from)."""
    return lower_model(parse_model(content, name), name, None, known_inputs)


def read_proto(model, known_inputs: dict | None = None, folder: Path | None = None) -> ModelIR:
    """An ``onnx.ModelProto`` in memory (its external data, if any, read from ``folder``)."""
    name = f"<ONNX model{' ' + model.graph.name if model.graph.name else ''}>"
    return lower_model(model, name, folder, known_inputs)
