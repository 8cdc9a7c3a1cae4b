"""Reading ONNX protobufs safely: the optional ``onnx`` package, size limits, external data kept in the model's folder.

A serialized protobuf cannot exceed 2 GiB (protobuf's own limit); anything larger, or larger than
kuiper's size budget, is refused before it is read. Tensors stored outside the file (ONNX's external
data) are read by kuiper, not by ``onnx.load``: a ``location`` must name a file inside the model's
folder, and the bytes read must match the tensor's declared shape.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import ModelFormatError, SizeLimitError, UnsupportedOperatorError
from ..limits import budget_bytes

# protobuf refuses messages of 2 GiB or more.
PROTOBUF_LIMIT = 2**31 - 1


def onnx_package():
    """The ``onnx`` module, or an error that says how to install it."""
    try:
        return importlib.import_module("onnx")
    except ImportError:
        raise UnsupportedOperatorError(
            "reading ONNX models needs the 'onnx' package, which is not installed: "
            "pip install \"kuiper[onnx]\" (or pip install onnx)") from None


def check_message_size(size: int, name: str) -> None:
    if size > PROTOBUF_LIMIT:
        raise ModelFormatError(f"{name}: {size} bytes, over protobuf's limit of 2 GiB for one message "
                               "(store large tensors as external data)")
    if size > budget_bytes():
        raise SizeLimitError(f"{name}: {size} bytes, over kuiper's size budget of {budget_bytes()} bytes "
                             "(raise it with KUIPER_MEMORY_BUDGET if this is intended)")


def parse_model(content: bytes, name: str):
    """A ModelProto from its serialized bytes."""
    onnx = onnx_package()
    check_message_size(len(content), name)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(content)
    except Exception as exc:  # protobuf's DecodeError, or a RuntimeWarning turned error: not a ModelProto
        raise ModelFormatError(f"{name}: not an ONNX model (the protobuf does not parse: {exc})") from None
    if not model.HasField("graph"):
        raise ModelFormatError(f"{name}: an ONNX model without a graph")
    return model


def read_model_file(path: Path):
    """A ModelProto from a ``.onnx`` file (its external data is read later, by ``external_bytes``)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: no such ONNX file") from None
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    check_message_size(size, str(path))
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return parse_model(content, str(path))


def external_bytes(tensor, folder: Path | None, expected: int, where: str) -> bytes:
    """The ``expected`` bytes of a tensor stored as external data, from a file inside ``folder``."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    if folder is None:
        raise ModelFormatError(f"{where}: its data is in the external file {location!r}, but the model was not "
                               "given as a file path, so there is no folder to read it from")
    if not location or Path(location).is_absolute():
        raise ModelFormatError(f"{where}: external data location {location!r} must be a relative path")
    root = folder.resolve()
    path = (root / location).resolve()
    if root != path and root not in path.parents:
        raise ModelFormatError(f"{where}: external data location {location!r} leaves the model's folder {root}")
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries.get("length", str(expected)))
    except ValueError:
        raise ModelFormatError(f"{where}: external data offset/length must be integers, found {entries}") from None
    if offset < 0 or length != expected:
        raise ModelFormatError(f"{where}: external data of {length} bytes at offset {offset}, "
                               f"expected {expected} bytes for the declared shape")
    try:
        with path.open("rb") as file:
            file.seek(offset)
            data = file.read(expected)
    except OSError as exc:
        raise ModelFormatError(f"{where}: cannot read external data {location!r}: {exc.strerror or exc}") from None
    if len(data) != expected:
        raise ModelFormatError(f"{where}: external data file {location!r} ends after {len(data)} of "
                               f"{expected} bytes")
    return data
