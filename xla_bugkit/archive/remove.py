"""Removing a directory tree however deep it goes.

``shutil.rmtree`` recurses in Python 3.11: on a tree some thousand levels deep it raises
``RecursionError`` halfway and leaves the rest behind, and a path that deep is too long for
any call that takes a path. This walk keeps one directory open at a time, moving by names
relative to it, with its own stack of the subdirectories still to remove.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> None:
    """Remove ``path``, a file or a directory with all it holds; what cannot go is left, as
    ``shutil.rmtree(path, ignore_errors=True)`` would."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError:  # not a directory, or a symlink (O_NOFOLLOW): the entry itself goes
        with contextlib.suppress(OSError):
            path.unlink()
        return
    names: list[str] = []  # the directories from path down to the open one
    pending = [_clear(fd)]  # per level: the subdirectories left to remove
    try:
        while pending:
            if pending[-1]:
                name = pending[-1].pop()
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # gone, or replaced by something else: leave it
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(_clear(fd))
                continue
            pending.pop()
            if names:
                try:
                    parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    break
                os.close(fd)
                fd = parent
                with contextlib.suppress(OSError):
                    os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        path.rmdir()


def _clear(fd: int) -> list[str]:
    """Unlink everything but the subdirectories in the directory ``fd``; return those."""
    dirs: list[str] = []
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
    return dirs
