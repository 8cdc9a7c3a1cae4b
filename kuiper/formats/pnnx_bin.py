"""Reader for the weight half of a PNNX model: ``.pnnx.bin``.

The file is a store-only zip (ZIP64 since 2024) whose entries
``<op name>.<weight name>`` hold raw little-endian, row-major bytes.

Policy for a .bin that changes under a loaded model: weights are COPIED into
memory at load time and the file is closed afterwards.  A memory map would
kill the process with SIGBUS if the file were truncated, and would silently
change the model's outputs if it were rewritten in place; a copy costs the
weights' size in private memory (the mapped pages were shared page cache) and
makes a loaded model independent of its files.  Checking each entry's CRC-32
reads every byte anyway, so copying adds little time.

The zip structures are parsed here (not with ``zipfile``) so that every
inconsistency is refused with a clear error: duplicate names, encryption,
compression, entries that overlap each other or the central directory, a local
header whose name differs from the central directory's, a CRC mismatch.  A
central directory far larger than the model declares is refused before it is
parsed, so a hostile file cannot make loading slow or large.
"""

from __future__ import annotations

import itertools
import os
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import ModelFormatError
from .files import open_regular_file

# Weights start on this boundary (cache lines, AVX-512 vectors): BLAS takes them as they are.
WEIGHT_ALIGNMENT = 64

_EOCD = struct.Struct("<4sHHHHIIH")
_EOCD_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")
_ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_ZIP64_EXTRA_ID = 0x0001
_FLAG_ENCRYPTED = 0x0001
_FLAG_STRONG_ENCRYPTION = 0x0040
_STORED = 0

# Unused entries tolerated beyond those the param file declares (PNNX writes none).
EXTRA_ENTRIES_ALLOWED = 1024
# Without a declared count (reading one entry by hand), still refuse absurd directories.
DEFAULT_MAX_ENTRIES = 65536

# PNNX dtype token -> numpy dtype read from the file
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


@dataclass(frozen=True)
class _Entry:
    name: str
    flags: int
    method: int
    crc: int
    size: int  # stored == uncompressed size
    header_offset: int
    span_end: int  # where the next entry may start at the earliest


class WeightArchive:
    """The ``.pnnx.bin`` of one model; use as a context manager (or call ``close()``)."""

    def __init__(self, path: str | os.PathLike | bytes | bytearray | memoryview, max_entries: int = DEFAULT_MAX_ENTRIES,
                 name: str = "<weights in memory>"):
        """``path`` is the file, or the archive's bytes (then ``name`` names them in messages)."""
        self._fd: int | None = None
        self._memory: memoryview | None = None
        if isinstance(path, (bytes, bytearray, memoryview)):
            self.path, self._memory = name, memoryview(path).cast("B")
        else:
            self.path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
            self._fd = open_regular_file(path, "weight file")
        try:
            self._size = os.fstat(self._fd).st_size if self._fd is not None else self._memory.nbytes
            if self._size == 0:
                raise self._error("the weight file is empty (expected a zip archive)")
            self._entries = self._read_central_directory(max_entries)
        except BaseException:
            self.close()
            raise

    # -- public ---------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._entries)

    def read(self, entry: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """Entry ``entry`` as a read-only array (a private copy) of ``shape`` and PNNX dtype ``dtype``."""
        info = self._entries.get(entry)
        if info is None:
            raise self._error(f"missing zip entry '{entry}' (declared by the param file)")
        if info.method != _STORED:
            raise self._error(
                f"entry '{entry}' is compressed (method {info.method}); PNNX stores weights uncompressed"
            )
        if dtype not in _FILE_DTYPES:
            raise self._error(f"entry '{entry}' has dtype '{dtype}', which kuiper cannot read")
        file_dtype = np.dtype(_FILE_DTYPES[dtype])
        count = 1
        for dim in shape:
            count *= dim
        expected = count * file_dtype.itemsize
        if info.size != expected:
            raise self._error(
                f"entry '{entry}' holds {info.size} bytes, but shape {tuple(shape)} {dtype} needs {expected}"
            )
        offset = self._data_offset(info)
        data = self._pread_aligned(offset, expected)
        if len(data) != expected:
            raise self._error(f"entry '{entry}' runs past the end of the file (truncated?)")
        if zlib.crc32(data) != info.crc:
            raise self._error(f"entry '{entry}' fails its CRC-32 check (the file is corrupt or was modified)")
        array = data.view(file_dtype)[:count].reshape(shape)
        array.flags.writeable = False
        if dtype == "bf16":
            # bfloat16 is the top half of a float32.
            array = (array.astype(np.uint32) << 16).view(np.float32)
            array.flags.writeable = False
        return array

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        self._memory = None
        if fd is not None:
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()

    # -- zip structures -----------------------------------------------------------
    def _error(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.path}: {message}")

    def _pread_aligned(self, offset: int, length: int) -> np.ndarray:
        """``length`` bytes at ``offset`` into a fresh buffer starting on a 64-byte boundary, so a
        weight that reaches BLAS needs no second, aligned copy.  Shorter when the file is."""
        self._check_range(offset, length)
        buffer = np.empty(length + WEIGHT_ALIGNMENT, dtype=np.uint8)
        start = -buffer.ctypes.data % WEIGHT_ALIGNMENT
        data = buffer[start : start + length]
        if self._memory is not None:
            got = min(length, self._size - offset)
            data[:got] = np.frombuffer(self._memory, np.uint8, got, offset)
            return data[:got]
        try:
            got = os.preadv(self._fd, [data], offset) if length else 0
        except OSError as exc:
            raise self._error(f"cannot read the weight file: {exc.strerror or exc}") from None
        return data[:got]

    def _pread(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        if self._memory is not None:
            return bytes(self._memory[offset : offset + length])
        try:
            return os.pread(self._fd, min(length, self._size - offset), offset)
        except OSError as exc:
            raise self._error(f"cannot read the weight file: {exc.strerror or exc}") from None

    def _check_range(self, offset: int, length: int) -> None:
        if self._fd is None and self._memory is None:
            raise self._error("the archive is closed")
        if not 0 <= offset <= self._size or length < 0:
            raise self._error(f"a zip record points outside the file (offset {offset}; the file has {self._size} bytes)")

    def _read_central_directory(self, max_entries: int) -> dict[str, _Entry]:
        tail_length = min(self._size, _EOCD.size + 0xFFFF)
        tail = self._pread(self._size - tail_length, tail_length)
        at = tail.rfind(_EOCD_SIGNATURE)
        if at < 0 or len(tail) - at < _EOCD.size:
            raise self._error("not a zip archive (no end-of-central-directory record)")
        _, disk, cd_disk, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
        eocd_position = self._size - tail_length + at
        if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
            count, cd_size, cd_offset, disk, cd_disk, eocd_position = self._read_zip64_end(eocd_position)
        if disk != 0 or cd_disk != 0:
            raise self._error("multi-disk zip archives are not supported")
        if count > max_entries:
            raise self._error(
                f"the central directory lists {count} entries, more than the {max_entries} this model can use"
            )
        if cd_offset + cd_size > eocd_position or count * _CENTRAL.size > cd_size:
            raise self._error("the central directory does not fit in the file (truncated or corrupt)")
        directory = self._pread(cd_offset, cd_size)
        entries: dict[str, _Entry] = {}
        position = 0
        for _ in range(count):
            if position + _CENTRAL.size > len(directory):
                raise self._error("the central directory is truncated")
            (signature, _, _, flags, method, _, _, crc, packed_size, size, name_length, extra_length,
             comment_length, _, _, _, header_offset) = _CENTRAL.unpack_from(directory, position)
            if signature != _CENTRAL_SIGNATURE:
                raise self._error(f"corrupt central directory record at offset {cd_offset + position}")
            name_start = position + _CENTRAL.size
            raw_name = directory[name_start : name_start + name_length]
            extra = directory[name_start + name_length : name_start + name_length + extra_length]
            position = name_start + name_length + extra_length + comment_length
            if position > len(directory):
                raise self._error("the central directory is truncated")
            name = raw_name.decode("utf-8", errors="replace")
            if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION):
                raise self._error(f"entry '{name}' is encrypted; PNNX weights are plain")
            packed_size, size, header_offset = self._apply_zip64_extra(name, extra, packed_size, size, header_offset)
            if method == _STORED and packed_size != size:
                raise self._error(f"entry '{name}' is stored but its sizes differ ({packed_size} vs {size})")
            if name in entries:
                raise self._error(f"duplicate zip entry '{name}'")
            span_end = header_offset + _LOCAL.size + name_length + packed_size
            entries[name] = _Entry(name, flags, method, crc, size, header_offset, span_end)
        self._check_no_overlap(entries, cd_offset)
        return entries

    def _read_zip64_end(self, eocd_position: int):
        locator = self._pread(eocd_position - _ZIP64_LOCATOR.size, _ZIP64_LOCATOR.size)
        if eocd_position < _ZIP64_LOCATOR.size or len(locator) != _ZIP64_LOCATOR.size:
            raise self._error("ZIP64 end record missing (truncated or corrupt)")
        signature, _, end_offset, _ = _ZIP64_LOCATOR.unpack(locator)
        if signature != _ZIP64_LOCATOR_SIGNATURE:
            raise self._error("ZIP64 end record locator is corrupt")
        record = self._pread(end_offset, _ZIP64_EOCD.size)
        if len(record) != _ZIP64_EOCD.size or end_offset + _ZIP64_EOCD.size > eocd_position:
            raise self._error("ZIP64 end record is out of the file (truncated or corrupt)")
        signature, _, _, _, disk, cd_disk, _, count, cd_size, cd_offset = _ZIP64_EOCD.unpack(record)
        if signature != _ZIP64_EOCD_SIGNATURE:
            raise self._error("ZIP64 end record is corrupt")
        return count, cd_size, cd_offset, disk, cd_disk, end_offset

    def _apply_zip64_extra(self, name: str, extra: bytes, packed_size: int, size: int, header_offset: int):
        """Replace 0xFFFFFFFF placeholders by the 64-bit values of the ZIP64 extra field."""
        needed = [size == 0xFFFFFFFF, packed_size == 0xFFFFFFFF, header_offset == 0xFFFFFFFF]
        if not any(needed):
            return packed_size, size, header_offset
        position = 0
        while position + 4 <= len(extra):
            field_id, length = struct.unpack_from("<HH", extra, position)
            body = extra[position + 4 : position + 4 + length]
            position += 4 + length
            if field_id != _ZIP64_EXTRA_ID:
                continue
            values = [struct.unpack_from("<Q", body, 8 * i)[0] for i in range(len(body) // 8)]
            if len(values) < sum(needed):
                break
            taken = iter(values)
            size = next(taken) if needed[0] else size
            packed_size = next(taken) if needed[1] else packed_size
            header_offset = next(taken) if needed[2] else header_offset
            return packed_size, size, header_offset
        raise self._error(f"entry '{name}' lacks the ZIP64 extra field its sizes require")

    def _check_no_overlap(self, entries: dict[str, _Entry], cd_offset: int) -> None:
        ordered = sorted(entries.values(), key=lambda entry: entry.header_offset)
        for previous, entry in itertools.pairwise(ordered):
            if entry.header_offset < previous.span_end:
                raise self._error(f"zip entries '{previous.name}' and '{entry.name}' overlap")
        if ordered and ordered[-1].span_end > cd_offset:
            raise self._error(f"zip entry '{ordered[-1].name}' overlaps the central directory")
        self._next_start = {
            entry.name: following.header_offset for entry, following in itertools.pairwise(ordered)
        }
        if ordered:
            self._next_start[ordered[-1].name] = cd_offset

    def _data_offset(self, info: _Entry) -> int:
        header = self._pread(info.header_offset, _LOCAL.size)
        if len(header) != _LOCAL.size:
            raise self._error(f"entry '{info.name}' has a truncated local header")
        signature, _, flags, method, _, _, _, _, _, name_length, extra_length = _LOCAL.unpack(header)
        if signature != _LOCAL_SIGNATURE:
            raise self._error(f"entry '{info.name}' has a corrupt local header")
        if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION) or method != info.method:
            raise self._error(f"entry '{info.name}': the local header disagrees with the central directory")
        local_name = self._pread(info.header_offset + _LOCAL.size, name_length)
        if local_name.decode("utf-8", errors="replace") != info.name:
            raise self._error(
                f"entry '{info.name}': the local header names '{local_name.decode('utf-8', errors='replace')}' "
                "(the central directory points at another entry)"
            )
        start = info.header_offset + _LOCAL.size + name_length + extra_length
        if start + info.size > self._next_start[info.name]:
            raise self._error(f"entry '{info.name}' overlaps the next entry or the central directory")
        return start
