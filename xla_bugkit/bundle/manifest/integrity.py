"""Opening a bundle: its manifest read first, then the archive extracted (or only read,
for ``check_bundle``) against it, every file its listed size and sha256 as it streams, the
reporter's edits to the text files allowed and sealed again."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle.manifest.loader import read_manifest, validate
from xla_bugkit.bundle.manifest.schema import FileEntry, Manifest, ModuleEntry
from xla_bugkit.bundle.manifest.write import sha256_of, write_manifest
from xla_bugkit.bundle.members import EDITABLE, ISSUE, MANIFEST

# How much an edit may add to one of them: room for pages of notes, and a bound on what a
# bundle can unpack beyond the sizes its manifest lists.
EDIT_SLACK = 1 << 20


def edited_notice(name: str) -> str:
    return f"{name} was edited after the bundle was made"


def expected_files(manifest: Manifest, raw: bytes) -> dict[str, archive.Expected]:
    """What extraction must find: every file the manifest lists (``EDITABLE`` ones with
    room for edits) and manifest.json itself as ``raw``, the bytes validated; nothing else."""
    expected = {
        f["path"]: archive.Expected(
            f["size"], f["sha256"], EDIT_SLACK if f["path"] in EDITABLE else 0
        )
        for f in manifest["files"]
    }
    expected[MANIFEST] = archive.Expected(len(raw), hashlib.sha256(raw).hexdigest())
    return expected


def edited_files(root: Path, manifest: Manifest) -> tuple[str, ...]:
    """The ``EDITABLE`` files under ``root`` that differ from the manifest's entry (every
    other file was held to its entry as it was extracted)."""
    edited: list[str] = []
    for entry in manifest["files"]:
        if entry["path"] in EDITABLE:
            path = root / entry["path"]
            if path.stat().st_size != entry["size"] or sha256_of(path) != entry["sha256"]:
                edited.append(entry["path"])
    return tuple(edited)


def check_bundle(path: Path) -> Manifest:
    """The manifest of ``path``, once the whole bundle has passed every check ``open_bundle``
    makes, with nothing written to disk. Raises ``BadBundleError`` with the first failure."""
    manifest, raw = read_manifest(path)
    archive.check_archive(path, expected=expected_files(manifest, raw))
    return manifest


def reseal(bundle: OpenBundle) -> Manifest:
    """The manifest of ``bundle`` with its edited files' new sizes and hashes, and a note for
    each, written over the unpacked copy's manifest.json (the user's archive is untouched)."""
    files: list[FileEntry] = []
    for entry in bundle.manifest["files"]:
        path = bundle.root / entry["path"]
        if entry["path"] in bundle.edited:
            entry = {"path": entry["path"], "size": path.stat().st_size, "sha256": sha256_of(path)}
        files.append(entry)
    notes = list(bundle.manifest["notes"])
    notes += [n for n in map(edited_notice, bundle.edited) if n not in notes]
    record = validate({**bundle.manifest, "files": files, "notes": notes})
    write_manifest(bundle.root, record)
    return record


def renamed(bundle: OpenBundle, manifest: Manifest, old: str, new: str) -> Manifest:
    """``bundle``'s report naming the archive ``new`` where it named ``old`` ("attach
    bundle.7z", "xla-bugkit verify bundle.7z"), once it is written under another name
    (``repack``, ``shrink``); ``manifest`` (the bundle's, resealed or not) is written again
    with the report's new size and hash. The user's own edits to the report stay. A bundle
    read from a folder keeps its report as it is: the folder's name is none the report uses
    (written in for the archive's, "b" would replace every b of the text)."""
    report = bundle.root / ISSUE
    if old == new or bundle.path.is_dir() or not report.is_file():
        return manifest
    text = report.read_text("utf-8")
    if old not in text:
        return manifest
    report.write_text(text.replace(old, new), "utf-8")
    files: list[FileEntry] = []
    for entry in manifest["files"]:
        if entry["path"] == ISSUE:
            entry = {"path": ISSUE, "size": report.stat().st_size, "sha256": sha256_of(report)}
        files.append(entry)
    record = validate({**manifest, "files": files})
    write_manifest(bundle.root, record)
    return record


@dataclass(frozen=True)
class OpenBundle:
    """A bundle unpacked into a fresh temporary folder and checked against its manifest."""

    path: Path  # the archive, or the folder it was unpacked into
    root: Path  # where it is unpacked
    manifest: Manifest
    files: tuple[Path, ...]  # every extracted file, in archive order
    edited: tuple[str, ...] = ()  # the EDITABLE files changed since the manifest was written

    def module_files(self, module: ModuleEntry) -> dict[str, Path]:
        """A module's files by role; the loader keeps each one among the listed files."""
        return {role: self.root / rel for role, rel in module["files"].items()}


@contextlib.contextmanager
def open_bundle(
    path: Path,
    *,
    prefix: str = "xla-bugkit-",
    unpacking: contextlib.AbstractContextManager[object] | None = None,
) -> Iterator[OpenBundle]:
    """Validate ``path``'s manifest, unpack the archive safely into a fresh temporary folder,
    holding every file to its size and sha256 as it is written, and remove the folder
    afterwards (on a refusal too: nothing is left in the temporary directory).

    ``unpacking`` (a progress phase, say) is entered around the extraction.
    """
    manifest, raw = read_manifest(path)
    dest = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with unpacking or contextlib.nullcontext():
            extracted = archive.extract_safely(path, dest, expected=expected_files(manifest, raw))
        edited = edited_files(dest, manifest)
        yield OpenBundle(path, dest, manifest, tuple(extracted), edited)
    finally:
        archive.remove_tree(dest)
