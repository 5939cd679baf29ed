"""The bundle's manifest: its JSON shape, writing it, and the one validating loader.

A bundle comes from someone else's machine, so ``load_manifest`` checks every key it reads
and keeps every path inside the files the manifest lists; ``open_bundle`` adds the safe
extraction, driven by the manifest's sizes and sha256s, that ``verify`` and ``repack``
share; ``check_bundle`` makes the same checks with nothing written, for ``show``.

``schema`` holds the shape, ``write`` writes it, ``checks`` says what each key must hold,
``loader`` validates and loads, ``integrity`` opens a bundle and checks its files, ``pick``
chooses the module a command on the bundle is about.
"""

from __future__ import annotations

from xla_bugkit.bundle.manifest.integrity import (
    EDIT_SLACK,
    OpenBundle,
    check_bundle,
    edited_files,
    edited_notice,
    expected_files,
    open_bundle,
    renamed,
    reseal,
)
from xla_bugkit.bundle.manifest.loader import load_manifest, read_manifest, validate
from xla_bugkit.bundle.manifest.pick import pick_module
from xla_bugkit.bundle.manifest.schema import (
    MANIFEST_LIMIT,
    SCHEMA_VERSION,
    FileEntry,
    JobEntry,
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
    "EDIT_SLACK",
    "MANIFEST_LIMIT",
    "SCHEMA_VERSION",
    "FileEntry",
    "JobEntry",
    "Manifest",
    "ModuleEntry",
    "OpenBundle",
    "OtherProcessEntry",
    "ProcessEntry",
    "check_bundle",
    "edited_files",
    "edited_notice",
    "expected_files",
    "file_entries",
    "load_manifest",
    "now",
    "open_bundle",
    "pick_module",
    "read_manifest",
    "renamed",
    "reseal",
    "sha256_of",
    "tool_name",
    "validate",
    "write_manifest",
]
