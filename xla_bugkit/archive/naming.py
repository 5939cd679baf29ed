"""What an output's name says of its archive format, checked before any work starts.

Kept apart from the readers and writers: ``collect`` checks its output before the program
starts, and must not wait for the archive libraries' imports to do so.
"""

from __future__ import annotations

from pathlib import Path

from xla_bugkit.config import FORMATS
from xla_bugkit.errors import BugkitError

_FORMATS = {".tar.gz": "tar.gz", ".tgz": "tar.gz", ".7z": "7z", ".zip": "zip"}


def suffix_format(path: Path) -> str | None:
    return _FORMATS.get(split_suffix(path.name)[1].lower())


def split_suffix(name: str) -> tuple[str, str]:
    """``name`` as its stem and the suffix that names its archive format, as written
    (``b.TAR.GZ``: ``b`` and ``.TAR.GZ``); the suffix is "" where none does."""
    lower = name.lower()
    suffix = next((s for s in _FORMATS if lower.endswith(s)), "")
    return name[: len(name) - len(suffix)], name[len(name) - len(suffix) :]


def output_format(out: Path, fmt: str | None) -> str:
    """The format to write ``out`` in: ``fmt``, else from its suffix; checked before any work."""
    chosen = fmt or suffix_format(out)
    if chosen is None:
        raise BugkitError(f"cannot tell the archive format of {out}: name it .7z, .zip or .tar.gz")
    if chosen not in FORMATS:
        raise BugkitError(f"unknown archive format {chosen!r}: choose one of {', '.join(FORMATS)}")
    if out.is_dir():
        raise BugkitError(f"cannot write {out}: it is a directory")
    return chosen
