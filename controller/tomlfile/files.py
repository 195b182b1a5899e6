"""The one way a configuration file is read: a regular file, of bounded size, every failure one message.

    data = read_file(path)                          # bytes, at most MAX_CONFIG_BYTES
    data = read_file(path, limit=MAX_SECRET_BYTES)  # a password file
    text = read_text(path)                          # the same, decoded as UTF-8

Every file a person names in a configuration (the table's file, the link authority's, paytables, register
maps, rig files, the supervisors file, the MQTT password file) is read here, so that none of them can hang
the program (a FIFO, a terminal), exhaust its memory (/dev/zero, a file of gigabytes) or end it with a raw
OSError (a path too long, a loop of symbolic links, a directory). A refusal is a FileRefused whose `reason`
reads after "cannot read ...: " and names the kind of file or the limit; its `errno` is the OSError's, if any.

Nothing that is not a regular file is ever opened: opening a serial port raises its modem lines, and a FIFO
blocks until someone writes to it. The file is looked at first (stat), then opened without blocking and
looked at again (fstat): what is read is what was looked at.
"""

from __future__ import annotations

import errno as _errno
import os
import stat
from dataclasses import dataclass
from os import PathLike

MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: the largest shipped configuration file is a few KiB
MAX_SECRET_BYTES = 4096  # a password file: one line
# Paths longer than this are shown shortened in messages (the whole path is still what is read).
_SHOWN_PATH = 160

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
# What errno means for a file given in a configuration, in words a technician acts on.
_REASONS = {
    _errno.ENOENT: "no such file",
    _errno.EACCES: "permission denied",
    _errno.EPERM: "permission denied",
    _errno.ENAMETOOLONG: "the path is too long (a name of more than 255 bytes, or 4096 in all)",
    _errno.ELOOP: "too many levels of symbolic links",
    _errno.ENOTDIR: "a part of the path is not a directory",
    _errno.EISDIR: "it is a directory, not a regular file",
}


class FileRefused(Exception):
    """A file that cannot be used as a configuration file. `reason` completes "cannot read FILE: ..."."""

    def __init__(self, path: str, reason: str, errno: int | None = None) -> None:
        super().__init__(f"{show_path(path)}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = errno


@dataclass(frozen=True)
class FileRead:
    """What was read, and the file's status as it was read (its mode, for the checks of who may read it)."""

    data: bytes
    stat: os.stat_result

    @property
    def mode(self) -> int:
        return stat.S_IMODE(self.stat.st_mode)

    def text(self, path: str | PathLike[str] = "") -> str:
        """The data as UTF-8; FileRefused naming the first bad byte."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FileRefused(os.fspath(path), f"is not UTF-8 text (byte {e.start})") from None


def show_path(path: str | PathLike[str]) -> str:
    """A path for a message: whole unless very long (a 5,000-character path is not repeated whole), its control
    characters escaped (a newline in a path must not start a line of its own in the message)."""
    text = os.fspath(path)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) <= _SHOWN_PATH:
        return text
    return f"{text[:60]}...{text[-40:]} ({len(text):,} characters)"


def os_reason(e: OSError) -> str:
    """An OSError met on a file a person named, in one short phrase."""
    if e.errno in _REASONS:
        return _REASONS[e.errno]
    return e.strerror.lower() if e.strerror else str(e)


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is ("a named pipe (FIFO)", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def limit_text(limit: int) -> str:
    """A size limit as people write it: "1 MiB", "4 KiB"."""
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % 1024 == 0:
        return f"{limit >> 10} KiB"
    return f"{limit:,} bytes"


def _refuse_kind(path: str, mode: int) -> None:
    kind = kind_of(mode)
    if kind is not None:
        raise FileRefused(path, f"it is {kind}, not a regular file")


def _refuse_size(path: str, size: int, limit: int) -> None:
    if size > limit:
        raise FileRefused(path, f"it is {size:,} bytes, more than the {limit_text(limit)} such a file may have")


def read_file(path: str | PathLike[str], *, limit: int = MAX_CONFIG_BYTES) -> FileRead:
    """The bytes of the regular file `path`, at most `limit` of them. Raises FileRefused."""
    name = os.fspath(path)
    try:
        before = os.stat(name)  # not opened unless regular: opening a device or a FIFO has effects
        _refuse_kind(name, before.st_mode)
        _refuse_size(name, before.st_size, limit)
        # O_NONBLOCK: a FIFO put in its place since the stat cannot block the open; O_NOCTTY: nor a
        # terminal become ours.
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except FileRefused:
        raise
    except OSError as e:
        raise FileRefused(name, os_reason(e), e.errno) from None
    except ValueError:  # a NUL byte in the path
        raise FileRefused(name, "the path contains a NUL character") from None
    try:
        st = os.fstat(fd)
        _refuse_kind(name, st.st_mode)
        _refuse_size(name, st.st_size, limit)
        chunks: list[bytes] = []
        size = 0
        # Read to the end, but never more than the limit and one byte: a file that grows (or a file of
        # /proc, whose size says 0) is still bounded.
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        _refuse_size(name, size, limit)
        return FileRead(b"".join(chunks), st)
    except OSError as e:
        raise FileRefused(name, os_reason(e), e.errno) from None
    finally:
        os.close(fd)


def read_text(path: str | PathLike[str], *, limit: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the regular file `path`, at most `limit` bytes. Raises FileRefused."""
    return read_file(path, limit=limit).text(path)


def probe(path: str | PathLike[str]) -> os.stat_result | FileRefused | None:
    """The status of `path` (following symbolic links); None when there is nothing there; a FileRefused
    for any other error (too long, a loop, permission denied). Never raises OSError."""
    name = os.fspath(path)
    try:
        return os.stat(name)
    except FileNotFoundError:
        return None
    except OSError as e:
        return FileRefused(name, os_reason(e), e.errno)
    except ValueError:
        return FileRefused(name, "the path contains a NUL character")


__all__ = ["MAX_CONFIG_BYTES", "MAX_SECRET_BYTES", "FileRead", "FileRefused", "kind_of", "limit_text", "os_reason",
           "probe", "read_file", "read_text", "show_path"]
