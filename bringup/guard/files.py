"""Every file bringup writes, and every file it reads, opened one safe way.

Round three found both directions open. Writing: symbolic links planted in a killed run's folder
made `run --resume` write outside the runs folder (a lock file's target truncated, FINDINGS.md's
and findings.json's targets overwritten), and a dangling link at the next run folder's name ended
in a traceback. Reading: a FIFO in place of a scenario, config.json, space file or prompts file
hung bringup silently (an open for reading waits for a writer), and one in place of the journal
ended in a traceback.

So there is one way to write and one way to read:

- `open_write` / `write_text` / `write_bytes`: the last component is opened with O_NOFOLLOW (a
  link there is refused, never followed), O_NONBLOCK (a FIFO there cannot block the open), and
  checked before anything is truncated: a regular file with no other hard link (a planted hard
  link would carry the write outside as surely as a symbolic one). `write_text(atomic=True)`
  writes a fresh file beside it and renames it over the old: a link at the name is replaced, not
  followed, and a reader never sees half a file.
- `make_dirs(path, inside=root)`: the folders a run or trial writes into, each below `inside`
  a real folder (no link), so nothing below the runs folder leads out of it.
- `open_read` / `read_bytes`: the file must be a regular file (a FIFO, a device, a folder or a
  socket is refused at once, with what it is), and is read to a size limit.

Each refusal is `UnsafeFile` (a ValueError), whose message names the file, what it is, and what
to do; the callers' error types wrap it for exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

_KIND = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


class UnsafeFile(ValueError):
    """A file bringup refuses to open as asked: a link where it writes, a special file where it
    reads or writes a regular one, a folder that leads out of the runs folder."""


def kind_of(mode: int) -> str:
    """What a file is, in words ("a FIFO (named pipe)", "a folder"); "a regular file" for one."""
    return _KIND.get(stat.S_IFMT(mode), "a regular file" if stat.S_ISREG(mode) else "a special file")


def _refuse_written(path: Path, why: str) -> UnsafeFile:
    return UnsafeFile(
        f"{path}: {why}; bringup never writes through a link or into a special file. Remove it (it was "
        "not made by bringup) and run again"
    )


def _open_fd(path: Path, append: bool) -> int:
    """A descriptor for writing `path`, refused unless it is (or becomes) a plain file of its own."""
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | os.O_CLOEXEC
        | os.O_NOFOLLOW
        | os.O_NONBLOCK
        | (os.O_APPEND if append else 0)
    )
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse_written(path, "is a symbolic link") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):
            kind = "a folder" if e.errno == errno.EISDIR else "a FIFO (named pipe) or a device"
            raise _refuse_written(path, f"is {kind}, not a file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        why = f"is {kind_of(st.st_mode)}" if not stat.S_ISREG(st.st_mode) else "has another hard link"
        raise _refuse_written(path, why + ", not a file of its own")
    os.set_blocking(fd, True)
    if not append:
        os.ftruncate(fd, 0)
    return fd


def open_write(
    path: Path | str,
    *,
    text: bool = True,
    append: bool = False,
    encoding: str = "utf-8",
    errors: str = "replace",
    newline: str | None = None,
) -> IO[Any]:
    """A file to write (truncated, or appended to), opened without following a link (UnsafeFile)."""
    fd = _open_fd(Path(path), append)
    if text:
        return open(fd, "a" if append else "w", encoding=encoding, errors=errors, newline=newline)
    return open(fd, "ab" if append else "wb")


def open_fd(path: Path | str, flags: int = os.O_RDWR, mode: int = 0o600) -> int:
    """A raw descriptor (a lock file), opened as `open_write` opens, never truncated."""
    p = Path(path)
    try:
        fd = os.open(p, flags | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse_written(p, "is a symbolic link") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):
            raise _refuse_written(p, "is not a file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        raise _refuse_written(
            p, f"is {kind_of(st.st_mode)}" if not stat.S_ISREG(st.st_mode) else "has another hard link"
        )
    os.set_blocking(fd, True)
    return fd


def write_bytes(path: Path | str, data: bytes, *, atomic: bool = False) -> None:
    """Write a whole file; `atomic`: a fresh file renamed over the name (a link there is replaced)."""
    p = Path(path)
    if not atomic:
        with open_write(p, text=False) as f:
            f.write(data)
        return
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of this pid (or a link planted at the name): never written through
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as f:
            f.write(data)
        if p.is_dir() and not p.is_symlink():
            raise _refuse_written(p, "is a folder, not a file")
        os.replace(tmp, p)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text(path: Path | str, text: str, *, atomic: bool = False, encoding: str = "utf-8") -> None:
    write_bytes(path, text.encode(encoding, errors="replace"), atomic=atomic)


def make_dirs(path: Path | str, inside: Path | str | None = None) -> Path:
    """`path` and every missing folder above it (`mkdir -p`), each folder below `inside` a real
    folder: a link or a file there (planted in a killed run's folder, or dangling at the next run's
    name) is UnsafeFile, not a write outside and not a traceback."""
    p = Path(path)
    base = Path(inside) if inside is not None else p.parent
    try:
        below = p.relative_to(base).parts
    except ValueError:
        raise UnsafeFile(f"{p}: not inside {base}; bringup writes only inside its runs folder") from None
    cur = base
    cur.mkdir(parents=True, exist_ok=True)
    for part in below:
        if part in ("..", ""):
            raise UnsafeFile(f"{p}: '..' in a path bringup writes to; it stays inside {base}")
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            try:
                os.mkdir(cur)
            except FileExistsError:  # made by another writer meanwhile (or a link that appeared)
                pass
            st = os.lstat(cur)
        if not stat.S_ISDIR(st.st_mode):
            what = kind_of(st.st_mode)
            dangling = " (dangling)" if stat.S_ISLNK(st.st_mode) and not cur.exists() else ""
            raise UnsafeFile(
                f"{cur}: is {what}{dangling}, where bringup keeps a folder of its runs folder {base}; "
                "bringup never writes through a link. Remove it and run again"
            )
    return p


def is_taken(path: Path | str) -> bool:
    """Whether a name is in use, a dangling link included (Path.exists follows links: a dangling
    one looked free, and the mkdir that followed ended in a traceback)."""
    return os.path.lexists(path)


def open_read(path: Path | str, what: str = "file") -> IO[bytes]:
    """A regular file opened for reading; a FIFO, device, folder or socket is UnsafeFile at once
    (the open itself cannot block: O_NONBLOCK), a missing file FileNotFoundError."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except IsADirectoryError:
        raise UnsafeFile(f"{p}: is a folder, not a {what}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeFile(f"{p}: is {kind_of(st.st_mode)}, not a {what}; give the path of a regular file")
    os.set_blocking(fd, True)
    return open(fd, "rb")


def read_bytes(path: Path | str, limit: int, what: str = "file") -> bytes:
    """A regular file's bytes, at most `limit` (UnsafeFile past it: one that grows while read too)."""
    p = Path(path)
    with open_read(p, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise UnsafeFile(
                f"{p}: {size / 2**20:.1f} MB is over the {limit / 2**20:.0f} MB limit for a {what}; "
                "is this the right file?"
            )
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{p}: over the {limit / 2**20:.0f} MB limit for a {what}")
    return data


def check_regular(path: Path | str, what: str = "file") -> None:
    """UnsafeFile unless `path` (followed) is a regular file or missing: for files a library opens
    by name (SQLite, transformers), checked before it does."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{path}: is {kind_of(st.st_mode)}, not a {what}")
