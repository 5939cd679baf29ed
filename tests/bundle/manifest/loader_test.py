"""The manifest's one validating loader, integrity check and ``open_bundle``, on real archives.

Each hostile manifest is one key of a valid one changed; every one must be refused with exit
code 4 and a reason that names the key, before anything is extracted.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bundles import HLO, ISSUE, stage
from xla_bugkit import archive
from xla_bugkit.bundle.manifest import (
    SCHEMA_VERSION,
    load_manifest,
    open_bundle,
    validate,
    write_manifest,
)
from xla_bugkit.bundle.members import MANIFEST
from xla_bugkit.cli.main import main
from xla_bugkit.errors import BadBundleError, ExitCode


def _bundle(tmp_path: Path, change: Callable[[dict[str, Any]], object] | None = None) -> Path:
    """A real zip bundle whose manifest ``change`` has edited in place."""
    root = tmp_path / "stage"
    manifest = stage(root)
    if change is not None:
        change(manifest)
    write_manifest(root, manifest)  # type: ignore[arg-type]  # deliberately malformed
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "bug.zip"
    archive.write_archive(files, out)
    return out


def test_a_valid_manifest_passes_unchanged(tmp_path: Path) -> None:
    manifest = stage(tmp_path)
    assert validate(copy.deepcopy(manifest)) == manifest


def test_a_valid_bundle_opens_checked_and_is_removed_afterwards(tmp_path: Path) -> None:
    path = _bundle(tmp_path)
    with open_bundle(path) as b:
        assert b.manifest["modules"][0]["label"] == "module_0000.jit_f"
        (hlo,) = b.module_files(b.manifest["modules"][0]).values()
        assert hlo.read_bytes() == b"\x0a\x05jit_f"
        assert {p.relative_to(b.root).as_posix() for p in b.files} == {HLO, ISSUE, MANIFEST}
        root = b.root
    assert not root.exists()


def _set(path: list[str | int], value: object) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        target: Any = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda manifest: manifest.pop(key)


HOSTILE = {
    "a file outside the bundle": (_set(["files", 0, "path"], "../evil.txt"), "bad path"),
    "an absolute path": (_set(["files", 0, "path"], "/etc/passwd"), "bad path"),
    "a name not in normal form": (_set(["files", 0, "path"], "a//b.txt"), "bad path"),
    "the manifest listing itself": (_set(["files", 0, "path"], MANIFEST), "cannot list itself"),
    "a size that is no number": (_set(["files", 0, "size"], "12"), "'size' must be a size"),
    "a negative size": (_set(["files", 0, "size"], -1), "'size' must be a size"),
    "a sha256 that is no hash": (_set(["files", 0, "sha256"], "abc"), "'sha256' must be"),
    "a module file not listed": (
        _set(["modules", 0, "files", "before_optimizations.hlo.pb"], "../../outside.pb"),
        "is not one of the files the manifest lists",
    ),
    "an unknown file role": (
        _set(["modules", 0, "files"], {"payload": HLO}),
        "unknown file role 'payload'",
    ),
    "a missing key": (_drop("modules"), "has no 'modules'"),
    "a key of the wrong type": (_set(["command"], "rm -rf /"), "'command' must be a list"),
    "a boolean for a number": (_set(["other_modules"], True), "'other_modules' must be"),
    "a replay record with no outcome": (_set(["modules", 0, "replay"], {}), "has no outcome"),
    "an unknown failure kind": (_set(["failure", "kind"], "meltdown"), "failure record"),
    "a failure headline that is no text": (_set(["failure", "headline"], ["x"]), "'headline'"),
    "a newer schema": (_set(["schema"], SCHEMA_VERSION + 1), "upgrade xla-bugkit"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_manifest_is_refused_with_its_reason(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, reason = HOSTILE[case]
    path = _bundle(tmp_path, change)
    with pytest.raises(BadBundleError, match=reason):
        load_manifest(path)
    for command in (["verify"], ["show"], ["repack"]):
        out = [str(tmp_path / "again.tar.gz")] if command == ["repack"] else []
        assert main([*command, str(path), *out]) == ExitCode.BAD_BUNDLE
        assert reason.split("'")[0] in capsys.readouterr().err
    assert not (tmp_path / "again.tar.gz").exists()


def test_a_module_listed_twice_is_refused(tmp_path: Path) -> None:
    def twice(manifest: dict[str, Any]) -> None:
        manifest["modules"].append(copy.deepcopy(manifest["modules"][0]))

    with pytest.raises(BadBundleError, match="used twice"):
        load_manifest(_bundle(tmp_path, twice))


def test_a_manifest_that_is_no_object(tmp_path: Path) -> None:
    root = tmp_path / "stage"
    root.mkdir()
    (root / MANIFEST).write_text(json.dumps([1, 2, 3]))
    out = tmp_path / "bug.zip"
    archive.write_archive({MANIFEST: root / MANIFEST}, out)
    with pytest.raises(BadBundleError, match="does not describe a bundle"):
        load_manifest(out)


def test_a_file_changed_after_the_manifest_fails_integrity(tmp_path: Path) -> None:
    root = tmp_path / "stage"
    write_manifest(root, stage(root))  # type: ignore[arg-type]
    (root / HLO).write_bytes(b"\x0a\x05jit_g")  # ISSUE.md may be edited; a module may not
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "bug.zip"
    archive.write_archive(files, out)
    changed = r"before_optimizations\.hlo\.pb does not match its sha256"
    with pytest.raises(BadBundleError, match=changed), open_bundle(out):
        pass
