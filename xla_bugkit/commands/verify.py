"""``xla-bugkit verify BUNDLE``: the maintainer's side. Unpack safely, check, replay, compare."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_bugkit import archive, bundle, replay
from xla_bugkit.errors import EXIT_NOT_REPRODUCED, EXIT_OK, BadBundleError
from xla_bugkit.signature import Failure
from xla_bugkit.ui import Ui

MANIFEST_LIMIT = 16 << 20  # a manifest lists files; 16 MiB is far beyond any real one


@dataclass(frozen=True)
class ModuleCheck:
    label: str
    verdict: replay.Verdict | None  # None: nothing in the bundle to replay
    recorded: str | None  # the outcome the reporter's replay gave

    @property
    def same_as_reporter(self) -> bool | None:
        if self.verdict is None or self.recorded is None:
            return None
        return self.verdict.outcome.value == self.recorded


@dataclass(frozen=True)
class VerifyResult:
    bundle: Path
    failure: Failure
    checks: tuple[ModuleCheck, ...]

    @property
    def reproduced(self) -> bool:
        return any(c.verdict is not None and c.verdict.reproduced for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "bundle": str(self.bundle),
            "integrity": "ok",
            "failure": self.failure.to_json(),
            "reproduced": self.reproduced,
            "modules": [
                {
                    "label": c.label,
                    "verdict": c.verdict.to_json() if c.verdict else None,
                    "recorded": c.recorded,
                    "same_as_reporter": c.same_as_reporter,
                }
                for c in self.checks
            ],
        }


def load_manifest(path: Path) -> bundle.Manifest:
    """The bundle's manifest, read without extracting anything; checked for shape."""
    try:
        raw = archive.read_member(path, bundle.MANIFEST, MANIFEST_LIMIT)
    except BadBundleError as e:
        if str(e).endswith(f"has no {bundle.MANIFEST}"):
            raise BadBundleError(
                f"{path} has no {bundle.MANIFEST}: not an xla-bugkit bundle"
            ) from e
        raise
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadBundleError(f"{path}: {bundle.MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise BadBundleError(f"{path}: {bundle.MANIFEST} does not describe a bundle")
    if data.get("schema") != bundle.SCHEMA_VERSION:
        raise BadBundleError(
            f"{path}: manifest schema {data.get('schema')!r} is not supported by this "
            f"xla-bugkit (it reads schema {bundle.SCHEMA_VERSION}); upgrade xla-bugkit"
        )
    manifest: bundle.Manifest = data  # type: ignore[assignment]  # shape checked above
    return manifest


def check_integrity(root: Path, manifest: bundle.Manifest, extracted: Sequence[Path]) -> None:
    """Every file the manifest lists is there with its size and sha256, and nothing else is."""
    listed = {f["path"]: f for f in manifest["files"]}
    present = {p.relative_to(root).as_posix() for p in extracted if p.is_file()}
    present.discard(bundle.MANIFEST)
    if extra := sorted(present - set(listed)):
        raise BadBundleError(f"the bundle holds files its manifest does not list: {extra[:3]}")
    if missing := sorted(set(listed) - present):
        raise BadBundleError(f"the bundle lacks files its manifest lists: {missing[:3]}")
    for name, entry in listed.items():
        path = root / name
        if path.stat().st_size != entry["size"] or bundle.sha256_of(path) != entry["sha256"]:
            raise BadBundleError(f"{name} does not match its sha256 in the manifest")


def verify_bundle(path: Path, *, timeout: float = 300.0, ui: Ui | None = None) -> VerifyResult:
    """Unpack ``path`` into a fresh temporary folder, check it, and replay every module."""
    ui = ui or Ui()
    manifest = load_manifest(path)
    try:
        failure = Failure.from_json(manifest["failure"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadBundleError(f"{path}: the manifest's failure record is malformed ({e})") from None
    dest = Path(tempfile.mkdtemp(prefix="xla-bugkit-verify-"))
    try:
        with ui.phase("unpacking"):
            extracted = archive.extract_safely(path, dest)
        check_integrity(dest, manifest, extracted)
        ui.say(f"{path.name}: integrity ok ({len(manifest['files'])} files)")
        checks = tuple(_replay_module(dest, m, failure, timeout, ui) for m in manifest["modules"])
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return VerifyResult(path, failure, checks)


def memory_limit(platform: str) -> int | None:
    """The address-space limit for replaying an untrusted module: 3/4 of this machine's RAM.

    A hostile or runaway module then fails in its child instead of swapping the machine to a
    halt. GPU clients map far more address space than they use, so they run unlimited.
    """
    if platform != "cpu":
        return None
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
    except (ValueError, OSError):
        return None


def _replay_module(
    root: Path, module: bundle.ModuleEntry, failure: Failure, timeout: float, ui: Ui
) -> ModuleCheck:
    recorded = (module.get("replay") or {}).get("outcome")
    files = {role: root / rel for role, rel in module["files"].items()}
    inp = bundle.replay_input(module["label"], files, module.get("platform", ""))
    if inp is None:
        return ModuleCheck(module["label"], None, recorded)
    with ui.phase(f"replaying {module['label']}"):
        verdict = replay.replay(
            inp, expected=failure, timeout=timeout, memory_limit=memory_limit(inp.platform)
        )
    return ModuleCheck(module["label"], verdict, recorded)


def verify(bundle_path: Path, *, json_output: bool = False, timeout: float = 300.0,
           ui: Ui | None = None) -> int:  # fmt: skip
    """CLI: print the verdict table (or JSON); exit 0 when the failure reproduces here."""
    ui = ui or Ui()
    result = verify_bundle(bundle_path, timeout=timeout, ui=ui)
    if json_output:
        json.dump(result.to_json(), sys.stdout, indent=2)
        print()
    else:
        print(render_table(result))
    return EXIT_OK if result.reproduced else EXIT_NOT_REPRODUCED


def render_table(result: VerifyResult) -> str:
    lines = [f"recorded failure: {result.failure.describe}", ""]
    for c in result.checks:
        if c.verdict is None:
            lines.append(f"{c.label}: not replayable here (no before-optimizations proto)")
            continue
        same = {True: "same as the reporter's", False: "differs from the reporter's",
                None: "no recorded verdict"}[c.same_as_reporter]  # fmt: skip
        lines.append(f"{c.label}: {c.verdict.outcome.value} ({same})")
        lines.append(f"    inputs: {c.verdict.inputs}; evidence: {c.verdict.evidence}")
        recorded = {True: "the same as the reporter's recorded result (deterministic)",
                    False: "different from the reporter's recorded result",
                    None: None}[c.verdict.matches_recorded]  # fmt: skip
        if recorded:
            lines.append(f"    output: {recorded}")
    lines.append("")
    lines.append(
        "the recorded failure reproduces here"
        if result.reproduced
        else "the recorded failure does NOT reproduce here"
    )
    return "\n".join(lines)
