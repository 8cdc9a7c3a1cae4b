"""Open model files safely: regular files only, every OS failure a ModelFormatError.

A FIFO, socket or device given as a model path would block ``open()`` or a read
forever, so the file is opened non-blocking and checked with ``fstat`` before
anything is read from it.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import ModelFormatError

_REASONS = {
    errno.ENOENT: "not found",
    errno.EISDIR: "is a directory",
    errno.ELOOP: "cannot be opened: too many levels of symbolic links (a link loop?)",
    errno.ENAMETOOLONG: "cannot be opened: the path is too long",
    errno.EACCES: "cannot be opened: permission denied",
    errno.ENOTDIR: "cannot be opened: a component of the path is not a directory",
}


def open_regular_file(path: str | os.PathLike, what: str) -> int:
    """Return a read-only file descriptor for ``path``, refusing anything but a regular file.

    ``what`` names the file for messages, e.g. "model file" or "weight file".
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = _REASONS.get(exc.errno, f"cannot be opened: {exc.strerror or exc}")
        raise ModelFormatError(f"{_shown(path)}: {what} {reason}") from None
    except (ValueError, TypeError) as exc:  # embedded NUL bytes, a non-path object
        raise ModelFormatError(f"{_shown(path)}: {what} cannot be opened: {exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise ModelFormatError(f"{_shown(path)}: {what} is {kind}; expected a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str | os.PathLike, what: str) -> bytes:
    """The whole content of a regular file (see ``open_regular_file``)."""
    fd = open_regular_file(path, what)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise ModelFormatError(f"{_shown(path)}: {what} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _shown(path) -> str:
    """The path for a message, shortened so an over-long path does not flood the terminal."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else repr(path)
    return text if len(text) <= 300 else text[:150] + "..." + text[-100:]
