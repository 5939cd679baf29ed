"""Bug bundles as archives: write one atomically, list it, read a member, extract it safely.

Three formats (``FORMATS``): ``7z``, ``zip`` and ``tar.gz``. Reading treats the archive as
hostile: see ``extract_safely``, which a manifest's list of files (``Expected`` by name) can
drive, and ``check_archive``, the same checks with nothing written. Names are loaded on
first use (py7zr's import is a tenth of a second): checking an output's name (``naming``)
needs none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_bugkit import _lazy
from xla_bugkit.config import FORMATS

__all__ = [
    "FORMATS",
    "Entry",
    "Expected",
    "check_archive",
    "compressed_size",
    "extract_safely",
    "format_of",
    "list_entries",
    "output_format",
    "read_member",
    "remove_tree",
    "write_archive",
]

_HOMES = {
    "Entry": "xla_bugkit.archive.read",
    "Expected": "xla_bugkit.archive.members",
    "check_archive": "xla_bugkit.archive.extract",
    "compressed_size": "xla_bugkit.archive.estimate",
    "extract_safely": "xla_bugkit.archive.extract",
    "format_of": "xla_bugkit.archive.read",
    "list_entries": "xla_bugkit.archive.read",
    "output_format": "xla_bugkit.archive.naming",
    "read_member": "xla_bugkit.archive.read",
    "remove_tree": "xla_bugkit.archive.remove",
    "write_archive": "xla_bugkit.archive.write",
}

if TYPE_CHECKING:
    from xla_bugkit.archive.estimate import compressed_size
    from xla_bugkit.archive.extract import check_archive, extract_safely
    from xla_bugkit.archive.members import Expected
    from xla_bugkit.archive.naming import output_format
    from xla_bugkit.archive.read import Entry, format_of, list_entries, read_member
    from xla_bugkit.archive.remove import remove_tree
    from xla_bugkit.archive.write import write_archive

__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
