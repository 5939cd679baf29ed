"""The bundle's manifest: its JSON shape, writing it, and the one validating loader.

A bundle comes from someone else's machine, so ``load_manifest`` checks every key it reads
and keeps every path inside the files the manifest lists; ``open_bundle`` adds the safe
extraction and the sha256 check that ``verify`` and ``repack`` share.

``schema`` holds the shape, ``write`` writes it, ``checks`` says what each key must hold,
``loader`` validates and loads, ``integrity`` opens a bundle and checks its files.
"""

from __future__ import annotations

from xla_bugkit.bundle.manifest.integrity import (
    EDITABLE,
    OpenBundle,
    check_integrity,
    edited_notice,
    open_bundle,
    reseal,
)
from xla_bugkit.bundle.manifest.loader import load_manifest, validate
from xla_bugkit.bundle.manifest.schema import (
    MANIFEST,
    MANIFEST_LIMIT,
    SCHEMA_VERSION,
    FileEntry,
    Manifest,
    ModuleEntry,
    OtherProcessEntry,
    ProcessEntry,
)
from xla_bugkit.bundle.manifest.write import (
    file_entries,
    now,
    sha256_of,
    tool_name,
    write_manifest,
)

__all__ = [
    "EDITABLE",
    "MANIFEST",
    "MANIFEST_LIMIT",
    "SCHEMA_VERSION",
    "FileEntry",
    "Manifest",
    "ModuleEntry",
    "OpenBundle",
    "OtherProcessEntry",
    "ProcessEntry",
    "check_integrity",
    "edited_notice",
    "file_entries",
    "load_manifest",
    "now",
    "open_bundle",
    "reseal",
    "sha256_of",
    "tool_name",
    "validate",
    "write_manifest",
]
