"""kuiper's ONNX support as a built-in plugin: the ONNX frontend (its nodes become canonical ops).

Plugin discovery imports this module for every ``kuiper.load``, whatever the format, so the reader
(and the ``onnx`` package it needs) is imported inside the methods that read ONNX, on first use.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..frontends import Frontend
from ..hookspecs import hookimpl
from ..model_ir import ModelIR

# A serialized ModelProto starts with field 1 (ir_version, a varint): tag byte 0x08.
_IR_VERSION_TAG = b"\x08"


class OnnxFrontend(Frontend):
    name = "onnx"
    description = "ONNX models (.onnx files, onnx.ModelProto objects or their bytes); needs the 'onnx' package"
    suffixes = (".onnx",)

    @classmethod
    def load(cls, path: Path, **options) -> ModelIR:
        from . import reader  # the reader, on first use (see the module docstring)

        return reader.read_path(path, _known_inputs(options))

    @classmethod
    def claims_content(cls, content: bytes) -> bool:
        return content[:1] == _IR_VERSION_TAG

    @classmethod
    def load_content(cls, content: bytes, name: str, **options) -> ModelIR:
        from . import reader

        return reader.read_bytes(content, name, _known_inputs(options))

    @classmethod
    def claims_object(cls, value) -> bool:
        # Recognised without importing onnx: a protobuf message of type ModelProto.
        return type(value).__name__ == "ModelProto" and callable(getattr(value, "SerializeToString", None))

    @classmethod
    def load_object(cls, value, **options) -> ModelIR:
        from . import reader

        return reader.read_proto(value, _known_inputs(options))


def _known_inputs(options: dict) -> dict | None:
    """The one option: ``known_inputs={graph input: value}`` fixes inputs that decide shapes at load time."""
    known = options.pop("known_inputs", None)
    if options:
        raise UsageError(f"the ONNX frontend takes only known_inputs=, got {', '.join(sorted(options))}")
    if known is not None and not isinstance(known, dict):
        raise UsageError(f"known_inputs must be a dict {{input name: array}}, got {type(known).__name__}")
    return known


@hookimpl
def kuiper_add_frontends():
    return [OnnxFrontend]
