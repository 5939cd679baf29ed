"""Writing a manifest: the time and tool stamps, each file's size and sha256, the JSON file."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path

from xla_bugkit import filememo
from xla_bugkit._version import __version__
from xla_bugkit.bundle.manifest.schema import FileEntry, Manifest
from xla_bugkit.bundle.members import MANIFEST


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def tool_name() -> str:
    return f"xla-bugkit {__version__}"


def sha256_of(path: Path) -> str:
    if (known := _KNOWN.get(path)) is not None:
        return known
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def hash_ahead(path: Path) -> None:
    """Hash a file that nothing writes again before it is needed (``filememo``): its
    ``sha256_of`` is then found, through any hard link to it, for as long as it is unchanged."""
    _KNOWN.put(path, sha256_of(path))


_KNOWN: filememo.Memo[str] = filememo.Memo()


def file_entries(root: Path) -> list[FileEntry]:
    """Every file under ``root`` but the manifest, with its size and sha256, sorted."""
    entries: list[FileEntry] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel != MANIFEST:
            entries.append({"path": rel, "size": path.stat().st_size, "sha256": sha256_of(path)})
    return entries


def write_manifest(root: Path, manifest: Manifest) -> Path:
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", "utf-8")
    return path
