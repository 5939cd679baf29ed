"""Lay out a bundle: which dump files go in, under what names, and the manifest that lists them."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from xla_bugkit import __version__, flags
from xla_bugkit.dumps import DumpIndex, DumpModule, Role
from xla_bugkit.redact import HOME_PATH, Redactor
from xla_bugkit.replay import ReplayInput
from xla_bugkit.select import Chosen

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"

# What a maintainer needs of each chosen module (XLA's docs: before, after, buffer assignment),
# plus what replay needs. Live ranges, buffer values, LLVM IR and objects stay behind: large,
# and rebuilt by any replay.
KEPT_ROLES = (
    Role.BEFORE_TEXT,
    Role.BEFORE_PROTO,
    Role.AFTER_TEXT,
    Role.AFTER_PROTO,
    Role.BUFFER_ASSIGNMENT,
    Role.MEMORY_REPORT,
    Role.DEBUG_OPTIONS,
    Role.PJRT_MLIR,
    Role.COMPILE_OPTIONS,
    Role.TOPOLOGY,
)
# Text files are redacted on the way in; binary protos are copied byte for byte.
_TEXT_SUFFIXES = (".txt", ".mlir", ".md", ".log", ".json")
_TEXT_ROLES = (Role.DEBUG_OPTIONS,)


class FileEntry(TypedDict):
    path: str
    size: int
    sha256: str


class ModuleEntry(TypedDict):
    label: str
    name: str
    id: int
    platform: str
    reasons: list[str]
    files: dict[str, str]  # role -> path in the bundle
    replay: dict[str, Any] | None


class Manifest(TypedDict):
    schema: int
    tool: str
    title: str  # the suggested issue title
    created: str
    versions: dict[str, str]
    command: list[str]
    xla_flags: list[str]
    exit_status: int | None
    failure: dict[str, Any]
    guess: bool
    modules: list[ModuleEntry]
    other_modules: int
    data: str  # "real inputs (snapshots)", "no input data (--no-data)", ...
    notes: list[str]
    files: list[FileEntry]


@dataclass(frozen=True)
class Planned:
    source: Path
    arcname: str
    role: Role
    module: str  # module label


def plan(index: DumpIndex, chosen: Sequence[Chosen], *, data: bool = True) -> list[Planned]:
    """The dump files that go into the bundle, each with its name inside the archive."""
    planned: list[Planned] = []
    for c in chosen:
        m = c.module
        files = [f for f in m.files if f.role in KEPT_ROLES]
        snapshot = m.newest_snapshot if data else None
        for f in [*files, *([snapshot] if snapshot else [])]:
            sub = "pjrt/" if len(f.path.parts) == 2 else ""
            arcname = f"modules/{m.label}/{sub}{f.path.name}"
            planned.append(Planned(index.root / f.path, arcname, f.role, m.label))
    return planned


# What goes first when a bundle is over its size budget: what a maintainer misses least.
_EXTRA_ROLES = (Role.MEMORY_REPORT, Role.AFTER_PROTO, Role.TOPOLOGY, Role.COMPILE_OPTIONS)


def drop_order(planned: Sequence[Planned]) -> list[Planned]:
    """Planned files in the order they are dropped to meet a size budget.

    First the extra files of every module but the first chosen, then snapshots (the real
    inputs) largest first, then the extra files of the first module, then whole modules
    other than the first. The first module's before/after text and buffer assignment stay.
    """
    if not planned:
        return []
    first = planned[0].module
    extra = [p for p in planned if p.role in _EXTRA_ROLES]
    order = [p for p in extra if p.module != first]
    order += sorted((p for p in planned if p.role is Role.SNAPSHOT),
                    key=lambda p: -p.source.stat().st_size)  # fmt: skip
    order += [p for p in extra if p.module == first]
    order += [p for p in planned if p.module != first and p not in order]
    return order


def stage(planned: Iterable[Planned], dest: Path, redactor: Redactor) -> Counter[str]:
    """Copy planned files into ``dest``: text redacted; in binaries, home paths rewritten.

    Returns the redaction counts (home paths, user names, ...) for the summary.
    """
    counts: Counter[str] = Counter()
    for p in planned:
        target = dest / p.arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.source.suffix in _TEXT_SUFFIXES or p.role in _TEXT_ROLES:
            text, found = redactor.text_with_report(p.source.read_text("utf-8", "replace"))
            target.write_text(text, "utf-8")
            counts.update(found)
        else:
            found_paths = redactor.copy_binary(p.source, target)
            if found_paths:
                counts[HOME_PATH] += found_paths
    return counts


def write_text(dest: Path, arcname: str, text: str) -> None:
    target = dest / arcname
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, "utf-8")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def file_entries(root: Path) -> list[FileEntry]:
    """Every file under ``root`` but the manifest, with its size and sha256, sorted."""
    entries: list[FileEntry] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel != MANIFEST:
            entries.append({"path": rel, "size": path.stat().st_size, "sha256": sha256_of(path)})
    return entries


def module_entry(c: Chosen, planned: Sequence[Planned]) -> ModuleEntry:
    files = {p.role.value: p.arcname for p in planned if p.module == c.module.label}
    return {
        "label": c.module.label,
        "name": c.module.name,
        "id": c.module.id,
        "platform": c.module.platform,
        "reasons": list(c.reasons),
        "files": files,
        "replay": None,
    }


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def write_manifest(root: Path, manifest: Manifest) -> Path:
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", "utf-8")
    return path


def tool_name() -> str:
    return f"xla-bugkit {__version__}"


def replay_input(name: str, files: Mapping[str, Path], platform: str) -> ReplayInput | None:
    """What a replay of one module needs, from its files by role (a dump or an unpacked bundle).

    None when there is no before-optimizations proto: nothing to compile.
    """
    hlo = files.get(Role.BEFORE_PROTO.value)
    if hlo is None:
        return None
    options = files.get(Role.DEBUG_OPTIONS.value)
    xla_flags = flags.from_debug_options(options.read_text("utf-8", "replace")) if options else ()
    return ReplayInput(
        name=name,
        hlo=hlo,
        snapshot=files.get(Role.SNAPSHOT.value),
        mlir=files.get(Role.PJRT_MLIR.value),
        compile_options=files.get(Role.COMPILE_OPTIONS.value),
        xla_flags=xla_flags,
        platform="gpu" if "gpu" in platform else platform or "cpu",
    )


def module_files(root: Path, module: DumpModule) -> dict[str, Path]:
    """A dump module's files by role, as ``replay_input`` takes them (newest snapshot)."""
    files = {f.role.value: root / f.path for f in module.files if f.role in KEPT_ROLES}
    snapshot = module.newest_snapshot
    if snapshot is not None:
        files[Role.SNAPSHOT.value] = root / snapshot.path
    return files
