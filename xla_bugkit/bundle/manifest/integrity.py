"""Opening a bundle: safe extraction into a fresh folder, every file checked against its size
and sha256, the reporter's edits to the text files allowed and sealed again."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle.manifest.loader import load_manifest, validate
from xla_bugkit.bundle.manifest.schema import MANIFEST, FileEntry, Manifest, ModuleEntry
from xla_bugkit.bundle.manifest.write import sha256_of, write_manifest
from xla_bugkit.errors import BadBundleError

# Text written for people, which the reporter may well edit before filing (the ISSUE.md
# template asks for it). No replay reads them: an edit is reported, not refused.
EDITABLE = frozenset({"ISSUE.md", "log.txt", "other-modules.txt"})


def edited_notice(name: str) -> str:
    return f"{name} was edited after the bundle was made"


def check_integrity(root: Path, manifest: Manifest, extracted: Sequence[Path]) -> tuple[str, ...]:
    """Every file the manifest lists is there with its size and sha256, and nothing else is;
    of the ``EDITABLE`` text files, those that differ are returned instead of refused."""
    listed = {f["path"]: f for f in manifest["files"]}
    present = {p.relative_to(root).as_posix() for p in extracted if p.is_file()}
    present.discard(MANIFEST)
    if extra := sorted(present - set(listed)):
        raise BadBundleError(f"the bundle holds files its manifest does not list: {extra[:3]}")
    if missing := sorted(set(listed) - present):
        raise BadBundleError(f"the bundle lacks files its manifest lists: {missing[:3]}")
    edited: list[str] = []
    for name, entry in listed.items():
        path = root / name
        if path.stat().st_size == entry["size"] and sha256_of(path) == entry["sha256"]:
            continue
        if name not in EDITABLE:
            raise BadBundleError(f"{name} does not match its sha256 in the manifest")
        edited.append(name)
    return tuple(edited)


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


@dataclass(frozen=True)
class OpenBundle:
    """A bundle unpacked into a fresh temporary folder and checked against its manifest."""

    path: Path  # the archive
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
    check every file's size and sha256, and remove the folder afterwards.

    ``unpacking`` (a progress phase, say) is entered around the extraction.
    """
    manifest = load_manifest(path)
    dest = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with unpacking or contextlib.nullcontext():
            extracted = archive.extract_safely(path, dest)
        edited = check_integrity(dest, manifest, extracted)
        yield OpenBundle(path, dest, manifest, tuple(extracted), edited)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
