"""The bundle's manifest: its JSON shape, writing it, and the one validating loader.

A bundle comes from someone else's machine, so ``load_manifest`` checks every key it reads
and keeps every path inside the files the manifest lists; ``open_bundle`` adds the safe
extraction and the sha256 check that ``verify`` and ``repack`` share.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from xla_bugkit import __version__, archive
from xla_bugkit.archive.members import name_problem, normalize
from xla_bugkit.capture.dumps import Role
from xla_bugkit.errors import BadBundleError
from xla_bugkit.failure import Failure
from xla_bugkit.frameworks import FrameworkEntry

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
MANIFEST_LIMIT = 16 << 20  # a manifest lists files; 16 MiB is far beyond any real one


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


class ProcessEntry(TypedDict):
    """The process of the run that failed (a rank, a worker): where the modules come from."""

    pid: int
    rank: int | None
    processes: int | None  # jax.process_count() in that process
    devices: int | None  # the device count its backend had (sharded modules need as many)
    platform: str
    why: str  # why this process was taken as the failing one
    memory_cap: int | None  # an address-space limit the program set itself (bytes)


class OtherProcessEntry(TypedDict):
    pid: int
    rank: int | None
    ended: str


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
    framework: NotRequired[FrameworkEntry]  # absent in bundles of older versions
    process: NotRequired[ProcessEntry]  # absent without the start-up hook's records
    other_processes: NotRequired[list[OtherProcessEntry]]
    shrink: NotRequired[dict[str, Any]]  # what ``xla-bugkit shrink`` found


# --- writing -------------------------------------------------------------------------


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def tool_name() -> str:
    return f"xla-bugkit {__version__}"


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


def write_manifest(root: Path, manifest: Manifest) -> Path:
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", "utf-8")
    return path


# --- reading ---------------------------------------------------------------------------

_SHA256 = re.compile(r"[0-9a-f]{64}")
_ROLES = frozenset(r.value for r in Role)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_str_dict(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


# Every key of a manifest, with the check its value must pass and what that check means.
_Check = Callable[[object], bool]
_TOP: dict[str, tuple[_Check, str]] = {
    "schema": (_is_int, "a number"),
    "tool": (lambda v: isinstance(v, str), "a string"),
    "title": (lambda v: isinstance(v, str), "a string"),
    "created": (lambda v: isinstance(v, str), "a string"),
    "versions": (_is_str_dict, "an object of strings"),
    "command": (_is_str_list, "a list of strings"),
    "xla_flags": (_is_str_list, "a list of strings"),
    "exit_status": (lambda v: v is None or _is_int(v), "a number or null"),
    "failure": (lambda v: isinstance(v, dict), "an object"),
    "guess": (lambda v: isinstance(v, bool), "true or false"),
    "modules": (lambda v: isinstance(v, list), "a list"),
    "other_modules": (_is_int, "a number"),
    "data": (lambda v: isinstance(v, str), "a string"),
    "notes": (_is_str_list, "a list of strings"),
    "files": (lambda v: isinstance(v, list), "a list"),
}
_FILE: dict[str, tuple[_Check, str]] = {
    "path": (lambda v: isinstance(v, str), "a string"),
    "size": (_is_size, "a size in bytes"),
    "sha256": (lambda v: isinstance(v, str) and bool(_SHA256.fullmatch(v)), "a sha256 in hex"),
}
_MODULE: dict[str, tuple[_Check, str]] = {
    "label": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "name": (lambda v: isinstance(v, str), "a string"),
    "id": (_is_int, "a number"),
    "platform": (lambda v: isinstance(v, str), "a string"),
    "reasons": (_is_str_list, "a list of strings"),
    "files": (_is_str_dict, "an object of strings"),
    "replay": (lambda v: v is None or isinstance(v, dict), "an object or null"),
}


def _is_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_optional_seconds(value: object) -> bool:
    if value is None:
        return True
    # A hang's replay waits as long as its run went without progress: never NaN or negative.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


# The failure record's fields that are there, each of its type (``Failure.from_json`` then
# checks the kind and phase names and that nothing required is missing).
_FAILURE: dict[str, tuple[_Check, str]] = {
    "headline": (lambda v: isinstance(v, str), "a string"),
    "signature": (lambda v: isinstance(v, str), "a string"),
    "exit_status": (lambda v: v is None or _is_int(v), "a number or null"),
    **{
        key: (_is_optional_str, "a string or null")
        for key in (
            *("kind", "phase", "signal", "status_code", "site", "exception", "compiling"),
            *("stopped_by", "executing", "function"),
        )
    },
    **{
        key: (_is_optional_seconds, "a number of seconds or null")
        for key in ("ran_seconds", "stalled_seconds")
    },
}


_FRAMEWORK: dict[str, tuple[_Check, str]] = {
    "name": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "version": (_is_optional_str, "a string or null"),
    "revision": (_is_optional_str, "a string or null"),
    "detected_from": (lambda v: isinstance(v, str), "a string"),
}


def _is_optional_int(value: object) -> bool:
    return value is None or _is_int(value)


_PROCESS: dict[str, tuple[_Check, str]] = {
    "pid": (_is_int, "a number"),
    **{k: (_is_optional_int, "a number or null") for k in ("rank", "processes", "devices")},
    "platform": (lambda v: isinstance(v, str), "a string"),
    "why": (lambda v: isinstance(v, str), "a string"),
    "memory_cap": (lambda v: v is None or _is_size(v), "a size in bytes or null"),
}
_OTHER_PROCESS: dict[str, tuple[_Check, str]] = {
    "pid": (_is_int, "a number"),
    "rank": (_is_optional_int, "a number or null"),
    "ended": (lambda v: isinstance(v, str), "a string"),
}


def _check_processes(data: dict[str, Any]) -> None:
    if "process" in data:
        _check_keys(data["process"], _PROCESS, "the process record")
    others = data.get("other_processes", [])
    if not isinstance(others, list):
        raise BadBundleError("the manifest: 'other_processes' must be a list")
    for i, other in enumerate(others):
        _check_keys(other, _OTHER_PROCESS, f"other_processes[{i}]")


# The shrink record: the keys it must have (others, such as notes, are free-form).
_CULPRIT_HOW = frozenset({"crash-inside", "disabling-hides", "not-a-pass"})


def _is_culprit(value: object) -> bool:
    if value is None:
        return True
    return (
        isinstance(value, dict)
        and value.get("how") in _CULPRIT_HOW
        and _is_optional_str(value.get("pass"))
    )


_SHRINK: dict[str, tuple[_Check, str]] = {
    "module": (lambda v: isinstance(v, str), "a string"),
    "instructions_before": (_is_size, "a count"),
    "instructions_after": (_is_size, "a count"),
    "probes": (_is_size, "a count"),
    "seconds": (lambda v: v is not None and _is_optional_seconds(v), "a number of seconds"),
    "culprit": (_is_culprit, 'null or {"pass": ..., "how": "crash-inside", ...}'),
    "needed_flags": (_is_str_list, "a list of strings"),
    "workarounds": (_is_str_list, "a list of strings"),
}


def _check_failure(data: dict[str, Any]) -> None:
    for key, (check, meaning) in _FAILURE.items():
        if key in data and not check(data[key]):
            raise BadBundleError(f"the failure record: {key!r} must be {meaning}")
    try:
        Failure.from_json(data)
    except (KeyError, TypeError, ValueError) as e:
        raise BadBundleError(f"the failure record is malformed ({e})") from None


def _check_keys(data: object, checks: dict[str, tuple[_Check, str]], where: str) -> None:
    if not isinstance(data, dict):
        raise BadBundleError(f"{where} is not an object")
    for key, (check, meaning) in checks.items():
        if key not in data:
            raise BadBundleError(f"{where} has no {key!r}")
        if not check(data[key]):
            raise BadBundleError(f"{where}: {key!r} must be {meaning}")


def _check_files(entries: list[Any]) -> set[str]:
    """The listed paths, each a plain relative name inside the bundle, listed once."""
    paths: set[str] = set()
    for i, entry in enumerate(entries):
        _check_keys(entry, _FILE, f"files[{i}]")
        path = entry["path"]
        problem = name_problem(path) or ("not in normal form" if normalize(path) != path else None)
        if problem is None and path == MANIFEST:
            problem = "the manifest cannot list itself"
        if problem is None and path in paths:
            problem = "listed twice"
        if problem is not None:
            raise BadBundleError(f"files[{i}]: bad path {path!r} ({problem})")
        paths.add(path)
    return paths


def _check_modules(modules: list[Any], listed: set[str]) -> None:
    labels: set[str] = set()
    for i, module in enumerate(modules):
        _check_keys(module, _MODULE, f"modules[{i}]")
        if module["label"] in labels:
            raise BadBundleError(f"modules[{i}]: the label {module['label']!r} is used twice")
        labels.add(module["label"])
        for role, path in module["files"].items():
            if role not in _ROLES:
                raise BadBundleError(f"modules[{i}]: unknown file role {role!r}")
            if path not in listed:
                raise BadBundleError(
                    f"modules[{i}]: {role} {path!r} is not one of the files the manifest lists"
                )
        replay = module["replay"]
        if replay is not None and not isinstance(replay.get("outcome"), str):
            raise BadBundleError(f"modules[{i}]: the replay record has no outcome")


def validate(data: object) -> Manifest:
    """``data`` checked as a manifest: every key there with the right type, every path a
    plain name inside the bundle, every module's file one of the listed files.

    Raises ``BadBundleError`` with the reason (exit 4).
    """
    if not isinstance(data, dict):
        raise BadBundleError("it is not a JSON object")
    if data.get("schema") != SCHEMA_VERSION:
        raise BadBundleError(
            f"manifest schema {data.get('schema')!r} is not supported by this "
            f"xla-bugkit (it reads schema {SCHEMA_VERSION}); upgrade xla-bugkit"
        )
    _check_keys(data, _TOP, "the manifest")
    listed = _check_files(data["files"])
    _check_modules(data["modules"], listed)
    _check_failure(data["failure"])
    if "framework" in data:
        _check_keys(data["framework"], _FRAMEWORK, "the framework record")
    _check_processes(data)
    if "shrink" in data:
        _check_keys(data["shrink"], _SHRINK, "the shrink record")
    manifest: Manifest = data  # type: ignore[assignment]  # every key checked above
    return manifest


def load_manifest(path: Path) -> Manifest:
    """The manifest of the bundle ``path``, read without extracting anything, and validated."""
    try:
        raw = archive.read_member(path, MANIFEST, MANIFEST_LIMIT)
    except BadBundleError as e:
        if str(e).endswith(f"has no {MANIFEST}"):
            raise BadBundleError(f"{path} has no {MANIFEST}: not an xla-bugkit bundle") from e
        raise
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadBundleError(f"{path}: {MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise BadBundleError(f"{path}: {MANIFEST} does not describe a bundle")
    try:
        return validate(data)
    except BadBundleError as e:
        raise BadBundleError(f"{path}: {MANIFEST}: {e}") from None


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
