"""Bug bundles as archives: write one atomically, list it, read a member, extract it safely.

Three formats (``FORMATS``): ``7z``, ``zip`` and ``tar.gz``. Reading treats the archive as
hostile: see ``extract_safely``.
"""

from __future__ import annotations

from xla_bugkit.archive.extract import extract_safely
from xla_bugkit.archive.read import Entry, format_of, list_entries, read_member
from xla_bugkit.archive.write import output_format, write_archive
from xla_bugkit.config import FORMATS

__all__ = [
    "FORMATS",
    "Entry",
    "extract_safely",
    "format_of",
    "list_entries",
    "output_format",
    "read_member",
    "write_archive",
]
