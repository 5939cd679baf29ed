"""The one validating loader: a bundle comes from someone else's machine, so every key read
is checked and every path kept inside the files the manifest lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xla_bugkit import archive
from xla_bugkit.archive.members import name_problem, normalize
from xla_bugkit.bundle.manifest import checks
from xla_bugkit.bundle.manifest.schema import MANIFEST_LIMIT, SCHEMA_VERSION, Manifest
from xla_bugkit.bundle.members import MANIFEST
from xla_bugkit.choose.dumps import Role
from xla_bugkit.errors import BadBundleError
from xla_bugkit.failure.classify import Failure

_ROLES = frozenset(r.value for r in Role)


def _check_keys(data: object, keys: checks.Checks, where: str) -> None:
    if not isinstance(data, dict):
        raise BadBundleError(f"{where} is not an object")
    for key, (check, meaning) in keys.items():
        if key not in data:
            raise BadBundleError(f"{where} has no {key!r}")
        if not check(data[key]):
            raise BadBundleError(f"{where}: {key!r} must be {meaning}")


def _check_processes(data: dict[str, Any]) -> None:
    if "job" in data:
        _check_keys(data["job"], checks.JOB, "the job part")
        for key, (check, meaning) in checks.JOB_OPTIONAL.items():
            if key in data["job"] and not check(data["job"][key]):
                raise BadBundleError(f"the job part: {key!r} must be {meaning}")
    if "process" in data:
        _check_keys(data["process"], checks.PROCESS, "the process record")
    others = data.get("other_processes", [])
    if not isinstance(others, list):
        raise BadBundleError("the manifest: 'other_processes' must be a list")
    for i, other in enumerate(others):
        _check_keys(other, checks.OTHER_PROCESS, f"other_processes[{i}]")


def _check_failure(data: dict[str, Any]) -> None:
    for key, (check, meaning) in checks.FAILURE.items():
        if key in data and not check(data[key]):
            raise BadBundleError(f"the failure record: {key!r} must be {meaning}")
    try:
        Failure.from_json(data)
    except (KeyError, TypeError, ValueError) as e:
        raise BadBundleError(f"the failure record is malformed ({e})") from None


def _check_files(entries: list[Any]) -> set[str]:
    """The listed paths, each a plain relative name inside the bundle, listed once."""
    paths: set[str] = set()
    for i, entry in enumerate(entries):
        _check_keys(entry, checks.FILE, f"files[{i}]")
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
        _check_keys(module, checks.MODULE, f"modules[{i}]")
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
    _check_keys(data, checks.TOP, "the manifest")
    for key, (check, meaning) in checks.TOP_OPTIONAL.items():
        if key in data and not check(data[key]):
            raise BadBundleError(f"the manifest: {key!r} must be {meaning}")
    listed = _check_files(data["files"])
    _check_modules(data["modules"], listed)
    _check_failure(data["failure"])
    if "framework" in data:
        _check_keys(data["framework"], checks.FRAMEWORK, "the framework record")
        if not isinstance(data["framework"].get("version_from", ""), str):  # optional
            raise BadBundleError("the framework record: 'version_from' must be a string")
    _check_processes(data)
    if "shrink" in data:
        _check_keys(data["shrink"], checks.SHRINK, "the shrink record")
        # Optional: older shrink records have only ``seconds``.
        probing = data["shrink"].get("probe_seconds")
        if probing is not None and not checks._is_optional_seconds(probing):
            raise BadBundleError("the shrink record: 'probe_seconds' must be a number of seconds")
    if "bisect" in data:
        _check_keys(data["bisect"], checks.BISECT, "the bisect record")
    manifest: Manifest = data  # type: ignore[assignment]  # every key checked above
    return manifest


def load_manifest(path: Path) -> Manifest:
    """The manifest of the bundle ``path``, read without extracting anything, and validated."""
    return read_manifest(path)[0]


def read_manifest(path: Path) -> tuple[Manifest, bytes]:
    """``load_manifest``, with the bytes it was read from: extraction pins manifest.json to
    them, so that the file unpacked is the one validated."""
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
        return validate(data), raw
    except BadBundleError as e:
        raise BadBundleError(f"{path}: {MANIFEST}: {e}") from None
