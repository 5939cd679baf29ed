"""Where a bundle is written: the checks made before any work starts.

A run can take hours; an output that cannot be written, or that would replace a file of the
user's, must stop ``collect`` before the program starts, not after it ends.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from xla_bugkit.archive.naming import output_format, split_suffix, suffix_format
from xla_bugkit.errors import BugkitError
from xla_bugkit.proc import leftovers


def check_output(out: Path, fmt: str | None, *, force: bool = False) -> str:
    """The format ``out`` is written in, once ``out`` is known to be writable.

    Refused: a name whose suffix says another format than ``fmt``, a folder that does not
    exist or cannot be written, and an existing file that is not an xla-bugkit bundle
    (``force`` allows that one; an earlier bundle may always be replaced).
    """
    chosen = output_format(out, fmt)
    named = suffix_format(out)
    if fmt is not None and named is not None and named != fmt:
        raise BugkitError(
            f"{out} is named as a {named} archive but --format is {fmt}: "
            f"name it {_renamed(out, fmt)} or leave out --format"
        )
    _check_folder(out)
    _check_replace(out, force=force)
    return chosen


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a file whose manifest loads: a bundle xla-bugkit wrote."""
    # Only an output that exists already is read: the readers' imports wait until then.
    from xla_bugkit.bundle.manifest import load_manifest

    try:
        load_manifest(path)
    except BugkitError:
        return False
    return True


def _renamed(out: Path, fmt: str) -> Path:
    return out.with_name(f"{split_suffix(out.name)[0]}.{fmt}")


def _check_folder(out: Path) -> None:
    folder = out.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise BugkitError(f"cannot write {out}: {folder} {what}")
    # Creating a file is the only test that holds for every case (permissions, a read-only
    # disk, a pseudo file system); it is the same owned temp name the archive writer uses,
    # so a kill in this instant leaves nothing the next collect would not remove.
    try:
        fd, name = tempfile.mkstemp(prefix=leftovers.partial_prefix(out), dir=folder)
    except OSError as e:
        raise BugkitError(f"cannot write {out}: {e.strerror or e}") from None
    os.close(fd)
    Path(name).unlink(missing_ok=True)


def _check_replace(out: Path, *, force: bool) -> None:
    try:
        mode = out.stat().st_mode
    except FileNotFoundError:
        return  # nothing there (or a dangling link, which the write replaces)
    except OSError as e:
        raise BugkitError(f"cannot write {out}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        raise BugkitError(f"{out} exists and is not a regular file: choose another output")
    if not force and not is_bundle(out):
        raise BugkitError(
            f"{out} exists and is not an xla-bugkit bundle: choose another output, "
            "or pass --force to replace it"
        )
