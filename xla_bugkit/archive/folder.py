"""A bundle unpacked by hand into a folder (``unzip bug.zip -d bug``), read as an archive:
its files are the members, vetted as an archive's are, and each read where it lies through
``open_inside``, which follows no link: a stranger's folder may hold links that lead out of
it, or be changed between its listing and its reading."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.archive.formats import copy_into
from xla_bugkit.archive.members import (
    FILE,
    SPECIAL,
    SYMLINK,
    Member,
    OpenSink,
    Vet,
    shown,
)
from xla_bugkit.errors import BadBundleError, BugkitError


class DirReader:
    """A bundle already unpacked into a folder (``unzip bundle.zip -d b``), read as an
    archive: its files are members, named by their path under it, and vetted alike (a
    symlink or a device in it is refused, never followed)."""

    def __init__(self, path: Path, max_entries: int | None, vet: Vet) -> None:
        self.current: str | None = None
        self._root = path
        self.members: list[Member] = []
        for folder, dirs, files in os.walk(path, onerror=_unreadable):
            dirs.sort()
            for name in sorted(files) + [d for d in dirs if os.path.islink(Path(folder, d))]:
                full = Path(folder, name)
                st = full.lstat()  # a folder is walked, not listed: a link to one is a link
                kind = (
                    FILE
                    if stat.S_ISREG(st.st_mode)
                    else SYMLINK
                    if stat.S_ISLNK(st.st_mode)
                    else SPECIAL
                )
                rel = full.relative_to(path).as_posix()
                self.members.append(Member(rel, st.st_size, kind, len(self.members)))
                vet(self.members[-1])
                if max_entries is not None and len(self.members) > max_entries:
                    return

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        for m in wanted:
            self.current = m.name
            with open_inside(self._root, m.name) as src:
                copy_into(src, open_sink(m))


def _unreadable(e: OSError) -> None:
    # os.walk would skip a folder it cannot list, and its files would seem missing.
    raise BugkitError(f"cannot read {e.filename}: {e.strerror}")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_inside(root: Path, name: str) -> BinaryIO:
    """The plain file ``name`` (a relative path) under the folder ``root``, opened one
    component at a time from ``root``, none followed if it is a link: a folder from someone
    else may hold links that lead out of it, or be changed between its listing and its
    reading. Raises ``BadBundleError`` for a link or anything but a plain file on the way,
    ``FileNotFoundError`` where there is nothing."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    fd = -1
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        for i, part in enumerate(parts):
            # O_NONBLOCK: a FIFO put where a file was listed must not block the reader.
            last = os.O_NONBLOCK if i == len(parts) - 1 else os.O_DIRECTORY
            parent, fd = fd, -1
            try:
                fd = os.open(part, os.O_RDONLY | _NOFOLLOW | last, dir_fd=parent)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if i == len(parts) - 1:  # O_NOFOLLOW's refusal
                    raise BadBundleError(f"{root}: refusing symlink entry {shown(name)}") from None
                raise _refused(root, name, "/".join(parts[: i + 1]), parent) from None
            finally:
                os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadBundleError(f"{root}: refusing {shown(name)}: it is not a plain file")
        return os.fdopen(fd, "rb")
    except BaseException as e:
        if fd >= 0:
            os.close(fd)
        if not isinstance(e, OSError) or isinstance(e, FileNotFoundError):
            raise
        raise BugkitError(f"cannot read {root / name}: {e.strerror}") from None


def _refused(root: Path, name: str, step: str, parent: int) -> BadBundleError:
    """Why ``name`` could not be opened through ``step``, a folder on its path (so far) in
    ``parent``: open says ELOOP or ENOTDIR for a link and for a file alike."""
    try:
        mode = os.stat(step.rsplit("/", 1)[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    what = "a link" if stat.S_ISLNK(mode) else "not a folder"
    return BadBundleError(f"{root}: refusing {shown(name)}: {shown(step)} is {what}")
