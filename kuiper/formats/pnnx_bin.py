"""Reader for the weight half of a PNNX model: ``.pnnx.bin``.

The file is a store-only zip (ZIP64 since 2024) whose entries
``<op name>.<weight name>`` hold raw little-endian, row-major bytes.  Because
the entries are stored, not compressed, each weight is a read-only NumPy view
into one memory map of the file: loading copies nothing.

``zipfile`` parses the central directory (both zip32 and ZIP64); the data
offset comes from each entry's local header.
"""

from __future__ import annotations

import mmap
import os
import struct
import zipfile

import numpy as np

from ..errors import ModelFormatError

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length
_LOCAL_SIGNATURE = b"PK\x03\x04"

# PNNX dtype token -> (numpy dtype read from the file, bytes per element)
_FILE_DTYPES = {
    "f32": "<f4",
    "f64": "<f8",
    "f16": "<f2",
    "bf16": "<u2",  # widened to float32 after reading
    "i64": "<i8",
    "i32": "<i4",
    "i16": "<i2",
    "i8": "i1",
    "u8": "u1",
    "bool": "?",
    "c64": "<c8",
    "c128": "<c16",
}


class WeightArchive:
    """The ``.pnnx.bin`` of one model, memory-mapped once."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size == 0:
                    raise ModelFormatError(f"{self.path}: the weight file is empty (expected a zip archive)")
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise ModelFormatError(f"{self.path}: weight file not found (expected beside the .pnnx.param)") from None
        except IsADirectoryError:
            raise ModelFormatError(f"{self.path}: is a directory, expected a .pnnx.bin zip archive") from None
        self._size = size
        try:
            with zipfile.ZipFile(self.path) as archive:
                self._entries = {info.filename: info for info in archive.infolist()}
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise ModelFormatError(f"{self.path}: not a readable zip archive ({exc})") from None

    def names(self) -> list[str]:
        return list(self._entries)

    def read(self, entry: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """Return entry ``entry`` as a read-only array of ``shape`` and PNNX dtype token ``dtype``."""
        info = self._entries.get(entry)
        if info is None:
            raise ModelFormatError(f"{self.path}: missing zip entry '{entry}' (declared by the param file)")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ModelFormatError(
                f"{self.path}: entry '{entry}' is compressed (method {info.compress_type}); PNNX stores weights uncompressed"
            )
        if dtype not in _FILE_DTYPES:
            raise ModelFormatError(f"{self.path}: entry '{entry}' has dtype '{dtype}', which kuiper cannot read")
        file_dtype = np.dtype(_FILE_DTYPES[dtype])
        count = 1
        for dim in shape:
            count *= dim
        expected = count * file_dtype.itemsize
        if info.file_size != expected:
            raise ModelFormatError(
                f"{self.path}: entry '{entry}' holds {info.file_size} bytes, but shape {tuple(shape)} {dtype} "
                f"needs {expected}"
            )
        offset = self._data_offset(entry, info)
        if offset + expected > self._size:
            raise ModelFormatError(f"{self.path}: entry '{entry}' runs past the end of the file (truncated?)")
        array = np.frombuffer(self._map, dtype=file_dtype, count=count, offset=offset).reshape(shape)
        if dtype == "bf16":
            # bfloat16 is the top half of a float32.
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array

    def _data_offset(self, entry: str, info: zipfile.ZipInfo) -> int:
        start = info.header_offset
        header = self._map[start : start + _LOCAL_HEADER.size]
        if len(header) != _LOCAL_HEADER.size:
            raise ModelFormatError(f"{self.path}: entry '{entry}' has a truncated local header")
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        if signature != _LOCAL_SIGNATURE:
            raise ModelFormatError(f"{self.path}: entry '{entry}' has a corrupt local header")
        return start + _LOCAL_HEADER.size + name_length + extra_length
