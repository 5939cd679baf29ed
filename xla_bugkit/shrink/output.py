"""The shrunk module added to a bundle: files under ``shrunk/``, a module entry that replay
and verify read like any other, the manifest's ``shrink`` record and an ISSUE.md section.

The original module stays. The shrunk one is checked through the normal replay (a fresh
process, as ``verify`` runs it) before it goes in; one that does not reproduce stays out.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from xla_bugkit import archive
from xla_bugkit.bundle import issue, members, repro
from xla_bugkit.bundle.manifest import (
    Manifest,
    ModuleEntry,
    file_entries,
    validate,
    write_manifest,
)
from xla_bugkit.choose.dumps import Role
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.hlo.literal import numpy_to_literal
from xla_bugkit.replay import ReplayInput, ReplayOptions, memory_limit, replay
from xla_bugkit.shrink.shrinker import Shrunk
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Verdict

FOLDER = members.SHRUNK
NOT_VERIFIED = "the shrunk module did not fail the same way through the normal replay: left out"


def add_files(stage: Path, shrunk: Shrunk, stem: str) -> dict[str, str]:
    """Write the shrunk module's files under ``stage/shrunk``; returns them by role."""
    folder = stage / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    result = shrunk.result
    names = {
        Role.BEFORE_TEXT.value: f"{stem}.before_optimizations.txt",
        Role.BEFORE_PROTO.value: f"{stem}.before_optimizations.hlo.pb",
        Role.SNAPSHOT.value: f"{stem}.snapshot.pb",
    }
    (folder / names[Role.BEFORE_TEXT.value]).write_text(result.text, "utf-8")
    (folder / names[Role.BEFORE_PROTO.value]).write_bytes(shrunk.proto)
    if shrunk.recorded:
        (folder / names[Role.SNAPSHOT.value]).write_bytes(
            hlo_proto.make_snapshot(
                shrunk.proto, [numpy_to_literal(np.asarray(a)) for a in shrunk.inputs]
            )
        )
    else:
        del names[Role.SNAPSHOT.value]  # the bundle carries no inputs: invent none
    if result.trace:
        (folder / "pass_trace.txt").write_text(result.trace, "utf-8")
    for name, text in result.around:
        (folder / name).write_text(text, "utf-8")
    (folder / "shrink.json").write_text(json.dumps(result.record(), indent=2) + "\n", "utf-8")
    return {role: f"{FOLDER}/{name}" for role, name in names.items()}


def check_replay(
    stage: Path,
    files: dict[str, str],
    original: ReplayInput,
    expected: Failure | None,
    timeout: float,
    arrays: Path | None = None,
) -> Verdict:
    """The shrunk module replayed the way ``verify`` replays it (its arrays kept in
    ``arrays``, for repro.py's reference)."""
    inp = ReplayInput(
        name=f"{original.name}.shrunk",
        hlo=stage / files[Role.BEFORE_PROTO.value],
        snapshot=stage / files[Role.SNAPSHOT.value] if Role.SNAPSHOT.value in files else None,
        xla_flags=original.xla_flags,
        platform=original.platform,
    )
    limit = memory_limit(inp.platform)
    return replay(
        inp,
        expected=expected,
        options=ReplayOptions(timeout=timeout, memory_limit=limit, keep_arrays=arrays),
    )


def add_repro(
    stage: Path, manifest: Manifest, entry: ModuleEntry, verdict: Verdict, arrays: Path | None
) -> repro.Repro | None:
    """``shrunk/repro.py`` (with its expected.npz): the bundle's standalone
    reproducer, for the shrunk module. Its paths are relative to the ``shrunk`` folder."""
    prefix = FOLDER + "/"
    files = {
        role: path[len(prefix) :] if path.startswith(prefix) else f"../{path}"
        for role, path in entry["files"].items()
    }
    failure = Failure.from_json(manifest["failure"])
    target = repro.Target(entry["label"], files, entry["platform"], verdict, arrays)
    return repro.write(
        stage / FOLDER,
        target,
        saw=failure.headline,
        kind=failure.kind,
        user_flags=manifest["xla_flags"],
    )


def shrunk_entry(original: ModuleEntry, files: dict[str, str], verdict: Verdict) -> ModuleEntry:
    kept = {r: p for r, p in original["files"].items() if r == Role.DEBUG_OPTIONS.value}
    return {
        "label": f"{original['label']}.shrunk",
        "name": original["name"],
        "id": original["id"],
        "platform": original["platform"],
        "reasons": [f"shrunk from {original['label']} by xla-bugkit shrink"],
        "files": {**files, **kept},
        "replay": verdict.to_json(),
    }


def finish(
    stage: Path,
    manifest: Manifest,
    shrunk: Shrunk,
    entry: ModuleEntry | None,
    out: Path,
    fmt: str,
    ui: Ui,
    started: float | None = None,
) -> Manifest:
    """Seal ``stage`` (the manifest with the shrink record, ISSUE.md's section) into ``out``;
    ``started`` (``time.monotonic()``) makes ``seconds`` the wall time up to the sealing."""
    if started is not None:
        shrunk.result = replace(shrunk.result, seconds=time.monotonic() - started)
    result = shrunk.result
    record = result.record()
    notes = list(manifest["notes"])
    modules = list(manifest["modules"])
    if entry is not None:
        modules.append(entry)
        shown = entry["files"][Role.BEFORE_TEXT.value]
    else:
        notes.append(NOT_VERIFIED)
        record["notes"] = [*record["notes"], NOT_VERIFIED]
        shown = ""
        for name in list((stage / FOLDER).glob("*")):
            if name.name not in ("shrink.json", "pass_trace.txt"):
                name.unlink()
    (stage / FOLDER / "shrink.json").write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    issue_path = stage / members.ISSUE
    if issue_path.exists():
        found = result.findings()
        if (stage / FOLDER / members.REPRO).exists():
            found.append(f"reproduce it alone: python {FOLDER}/{members.REPRO}")
        around = [f"{FOLDER}/{n}" for n, _ in result.around if (stage / FOLDER / n).exists()]
        if around:
            found.append(f"the module right before and after the pass: {', '.join(around)}")
        section = issue.shrink_section(found, result.text if shown else "", shown)
        issue_path.write_text(issue.with_section(issue_path.read_text("utf-8"), section))
    sealed = {**manifest, "modules": modules, "notes": notes, "shrink": record}
    sealed["files"] = file_entries(stage)
    final = validate(sealed)
    write_manifest(stage, final)
    files = {p.relative_to(stage).as_posix(): p for p in sorted(stage.rglob("*")) if p.is_file()}
    size = archive.write_archive(files, out, fmt, progress=ui.progress("compressing"))
    ui.say(f"wrote {out} ({size:,} bytes, {fmt})")
    return final


def rename_in_report(stage: Path, old: str, new: str) -> None:
    """ISSUE.md naming the archive ``new`` where it named ``old`` (attach it, verify it)."""
    report = stage / members.ISSUE
    if old != new and report.is_file():
        report.write_text(report.read_text("utf-8").replace(old, new), "utf-8")


def copy_bundle(root: Path, stage: Path) -> None:
    shutil.copytree(root, stage, dirs_exist_ok=False)
