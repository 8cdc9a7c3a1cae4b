"""Files a user names on the command line or to ``kuiper.dask``: .npy/.npz arrays in, outputs out.

One reader and one writer, so ``kuiper run``, ``kuiper te run``, ``kuiper hlo dfg`` and
``kuiper.dask.map_files`` refuse the same mistakes with the same one-line messages:

* **Reading** an array file opens regular files only (a FIFO would block forever), looks at
  the first bytes before handing the file to NumPy, and never unpickles.  The look comes
  first because NumPy treats anything without the .npy or zip magic as a pickle, so a text
  file or a JPEG would otherwise be reported as "pickled data" instead of "not a .npy file".
  Then every array's header is read, and its declared size checked against the bytes the
  file (or the .npz member) holds and against the memory budget (kuiper.limits), before
  anything is allocated or inflated: a 200-byte .npy declaring 15 TiB, or a 3 MB .npz that
  inflates to 3 GiB, is refused at once by name.
* **Writing** checks the path before any work is done (the folder exists, is a folder and
  can be written; the suffix names a format kuiper writes), then writes to a hidden
  temporary name beside the target and renames it into place, so an interrupted run never
  leaves a half-written output.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import uuid
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .errors import InputError, SizeLimitError, UsageError
from .limits import budget_bytes, check_size

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"  # local file header "PK\x03\x04"; an empty zip starts "PK\x05\x06"
ARRAY_SUFFIXES = (".npy", ".npz")
# What NumPy raises for a damaged .npy/.npz: bad header (ValueError), short file (EOFError),
# damaged zip directory or CRC (BadZipFile), damaged deflate stream (zlib.error).
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


def read_arrays(path: str | os.PathLike, what: str) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a .npy file, or ``{key: array}`` of a .npz file, read completely.

    ``what`` names the file in messages (``"--input x.npy"``, or the path itself).
    """
    with _open_regular_file(path, what) as handle:
        try:
            head = handle.read(len(NPY_MAGIC))
            handle.seek(0)
        except OSError as exc:
            raise InputError(f"{what}: cannot read ({exc.strerror or exc})") from None
        if not (head.startswith(NPY_MAGIC) or head.startswith(ZIP_MAGIC)):
            raise InputError(f"{what}: not a .npy file or a .npz file (it starts with {head!r})")
        try:
            if head.startswith(NPY_MAGIC):
                _check_npy_header(handle, os.fstat(handle.fileno()).st_size, what)
            else:
                _check_npz_headers(handle, what)
            handle.seek(0)
            data = np.load(handle, allow_pickle=False)
            if isinstance(data, np.lib.npyio.NpzFile):
                with data:
                    return {key: data[key] for key in data.files}
            return data
        except _READ_ERRORS as exc:
            raise InputError(f"{what}: cannot read a .npy/.npz file ({type(exc).__name__}: {exc})") from None


def read_feeds(specs: Iterable[str], positional_names: list[str] | None = None) -> dict[str, np.ndarray]:
    """``--input`` values as feeds: ``NAME=x.npy``, a ``.npz`` (fed by its keys), or a bare ``x.npy``.

    A bare ``.npy`` takes the name at its position in ``positional_names`` (a model's inputs);
    where there is no such order (te kernels), it must be named.
    """
    feeds: dict[str, np.ndarray] = {}
    for index, spec in enumerate(specs):
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = None, spec
        arrays = read_arrays(path, f"--input {spec}")
        if isinstance(arrays, dict):
            feeds.update(arrays)
            continue
        if name is None:
            if positional_names is None:
                raise UsageError(f"--input {spec}: name the tensor, NAME={path}")
            if index >= len(positional_names):
                raise InputError(f"--input {spec}: the model has only {len(positional_names)} input(s)")
            name = positional_names[index]
        feeds[name] = arrays
    return feeds


def _check_npy_header(handle, available: int, what: str) -> int:
    """Read a .npy header at the handle's position; refuse a declared size over what the file holds
    (``available`` bytes from the position) or over the budget.  Returns the declared byte count."""
    start = handle.tell()
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    if dtype.hasobject:
        raise InputError(f"{what}: holds Python objects (Object arrays cannot be loaded without unpickling, "
                         "which kuiper never does); give numeric arrays")
    check_size(shape, dtype.itemsize, what)
    declared = math.prod(shape) * dtype.itemsize
    holds = available - (handle.tell() - start)
    if declared > holds:
        raise InputError(f"{what}: the header declares shape {shape} of {dtype} ({declared} bytes), "
                         f"but the file holds {max(holds, 0)} bytes of data")
    return declared


def _check_npz_headers(handle, what: str) -> None:
    """Each member's header, read without inflating the rest of it, against its size and the budget."""
    total = 0
    with zipfile.ZipFile(handle) as archive:
        for info in archive.infolist():
            member = f"{what}: member {info.filename}"
            with archive.open(info) as stream:  # inflates at most info.file_size bytes, however it lies
                if stream.read(len(NPY_MAGIC)) != NPY_MAGIC:
                    continue  # not an array: NumPy refuses it by name when asked for it
                stream.seek(0)
                total += _check_npy_header(stream, info.file_size, member)
    if total > budget_bytes():
        raise SizeLimitError(f"{what}: its arrays declare {total} bytes together, over the size budget of "
                             f"{budget_bytes()} bytes (raise KUIPER_MEMORY_BUDGET if this is intended)")


def _open_regular_file(path: str | os.PathLike, what: str):
    """A binary handle on ``path``, which must be a regular file: opening a FIFO would block forever.

    (kuiper.formats.files does the same for model files, race-free with O_NONBLOCK; a
    check before opening is enough for a file the user names on the command line, and
    keeps this module free of the PNNX frontend, which the te and HLO commands may not
    import.)
    """
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            return open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{what}: input file not found") from None
    except (OSError, ValueError) as exc:  # permission denied, a loop of links, a NUL in the name
        raise InputError(f"{what}: cannot open the input file ({getattr(exc, 'strerror', None) or exc})") from None
    kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
    raise InputError(f"{what}: input file is {kind}; expected a regular file")


def count_rows(path: str | os.PathLike) -> int:
    """Dim 0 of a .npy file (of the first array of a .npz); 0 when it cannot be read.

    Only for reports.  A .npy is memory-mapped, so only its header is read, however large
    the file; a .npz member cannot be mapped and is read whole (this runs only when a
    finished output is found again after a worker died).
    """
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                data = data[data.files[0]]
        return int(data.shape[0])
    except (*_READ_ERRORS, IndexError):
        return 0


def text_output_argument(text: str) -> str | None:
    """argparse ``type`` of a text output: ``-o -`` means stdout, as in most command-line tools."""
    return None if text == "-" else text


def check_output_file(path: str | os.PathLike, what: str, suffixes: Iterable[str] = ()) -> Path:
    """Refuse an output path that cannot be written, before any work is done.

    ``suffixes``: the formats this output can take ("" allows a name without a suffix); a
    path with another suffix is a usage error (``-o graph.png`` must not get DOT text).
    """
    path = Path(path)
    suffixes = tuple(suffixes)
    if suffixes and path.suffix.lower() not in suffixes:
        named = " or ".join(suffix for suffix in suffixes if suffix)
        raise UsageError(f"{what}: kuiper writes {named} here, not {path.suffix or 'a name without a suffix'}")
    if path.is_dir():
        raise InputError(f"{what}: is a directory; give a file name")
    folder = path.parent
    if not folder.exists():
        raise InputError(f"{what}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise InputError(f"{what}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{what}: cannot write in the folder {folder} (permission denied)")
    return path


def prepare_output_dir(path: str | os.PathLike, what: str) -> Path:
    """Make the output folder (and its parents) if needed; refuse a file or an unwritable folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what}: {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{what}: cannot make the folder {path} ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{what}: cannot write in the folder {path} (permission denied)")
    return path


def write_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray], what: str) -> None:
    """A .npz of every array (by name), else the single array as .npy bytes, at exactly ``path``."""
    path = Path(path)
    with _atomic_output(path, what) as handle:
        # A file object, so NumPy does not add .npy/.npz to a name that lacks it.
        if path.suffix.lower() == ".npz":
            np.savez(handle, **arrays)
        else:
            np.save(handle, next(iter(arrays.values())), allow_pickle=False)


def write_text(path: str | os.PathLike, text: str, what: str) -> None:
    with _atomic_output(Path(path), what) as handle:
        handle.write(text.encode("utf-8"))


@contextlib.contextmanager
def _atomic_output(path: Path, what: str):
    """Yield a binary handle on a hidden temporary file beside ``path``; rename it to ``path`` when done."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as handle:
            yield handle
        os.replace(temporary, path)
    except OSError as exc:  # a folder that vanished, a full disk, a read-only file system
        raise InputError(f"{what}: cannot write {path} ({exc.strerror or exc})") from None
    finally:
        temporary.unlink(missing_ok=True)
