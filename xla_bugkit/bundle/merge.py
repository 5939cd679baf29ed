"""One bundle from the parts of a job that ran on several machines (``xla-bugkit merge``).

Each process of a ``jax.distributed`` job ran under its own ``collect`` and wrote its part
(``bundle.part-I-of-N.zip``). The merged bundle is judged by the part that failed inside XLA:
its files, modules and verdicts come first, as they were; every other part is summarised (how
it ended, when, its first module) in the manifest's ``job.merged`` and ISSUE.md's job
section, and kept under ``parts/part-I/`` (its manifest, log, environment and the modules no
kept part has: a module compiled the same way by several processes is kept once). The size
budget applies to the whole: the other parts' modules go first.

Nothing in a part becomes a path but the part's own checked file names, under the folder
named by its place in the job.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_bugkit import archive, config
from xla_bugkit.bundle import job_text, members, stitch, stitched_replay
from xla_bugkit.bundle.manifest import (
    Manifest,
    ModuleEntry,
    file_entries,
    validate,
    write_manifest,
)
from xla_bugkit.bundle.parts import Part, choose, job_size, opened
from xla_bugkit.choose.dumps import Role
from xla_bugkit.errors import ExitCode
from xla_bugkit.ui import Ui

PARTS_DIR = "parts"
_MODULES = "modules"
# An other part's files kept beside its summary (its ISSUE.md and repro.py speak for a
# process that did not fail; the merged bundle's own say what to do).
_PART_FILES_LEFT = frozenset({members.ISSUE, members.REPRO})


@dataclass(frozen=True)
class Merged:
    """What ``merge`` wrote and found."""

    out: Path
    size: int
    manifest: Manifest
    failing: int  # the part the bundle is judged by
    parts: int  # the job's size
    exit_code: ExitCode
    lines: tuple[str, ...]  # the summary, as printed


def default_output(paths: Sequence[Path]) -> Path:
    """The parts' common name without the part: ``bundle.part-0-of-8.zip`` -> ``bundle.zip``."""
    name = paths[0].name
    plain = re.sub(r"\.part-\d+(?:-of-\d+)?(?=\.[^/]*$|$)", "", name)
    return paths[0].with_name(plain if plain != name else f"merged-{name}")


def fingerprint(part: Part, module: ModuleEntry) -> str | None:
    """A module's identity across processes: the sha256 of its HLO before optimizations (the
    same program compiled for the same devices gives the same text in every process)."""
    hashes = {f["path"]: f["sha256"] for f in part.manifest["files"]}
    for role in (Role.BEFORE_TEXT.value, Role.BEFORE_PROTO.value):
        path = module["files"].get(role)
        if path is not None and path in hashes:
            return f"{role}:{hashes[path]}"
    return None


def _module_dirs(module: ModuleEntry) -> set[str]:
    """The folders under ``modules/`` that hold a module's files."""
    paths = module["files"].values()
    return {"/".join(p.split("/")[:2]) for p in paths if p.startswith(f"{_MODULES}/")}


def merge(
    paths: Sequence[Path],
    out: Path,
    fmt: str,
    *,
    max_size: int | None,
    ui: Ui,
    timeout: float = config.REPLAY_TIMEOUT,
) -> Merged:
    """Write ``out``, one bundle of the job from its parts' bundles ``paths``; a module whose
    inputs were stitched is replayed on them (``timeout`` seconds each) and judged again."""
    with opened(paths) as parts, tempfile.TemporaryDirectory(prefix="xla-bugkit-merge-") as tmp:
        failing = choose(parts)
        count = job_size(failing.bundle) or max(p.index for p in parts) + 1
        stage = Path(tmp) / "stage"
        kept, same_as = _kept_modules(parts, failing)
        sources = _sources(parts, failing, kept)
        inputs = stitch.stitch(parts, failing, count, Path(tmp) / "stitched")
        rejudged = stitched_replay.rejudge(failing, inputs, timeout=timeout, ui=ui)
        # A module its part proved on other inputs, and its stitched inputs did not, keeps
        # the part's: the bundle replays as its verdict says.
        inputs = inputs.without(rejudged.unstitched)
        sources = {n: p for n, p in sources.items() if not _spent(n, p, inputs)}
        sources.update(inputs.snapshots.values())
        left_out: list[str] = []
        while True:
            manifest = _stage(
                stage, sources, parts, failing, count, same_as, out, left_out, inputs, rejudged
            )
            files = {p.relative_to(stage).as_posix(): p for p in sorted(stage.rglob("*"))}
            files = {name: p for name, p in files.items() if p.is_file()}
            size = archive.write_archive(files, out, fmt, progress=ui.progress("compressing"))
            if max_size is None or size <= max_size:
                break
            dropped = _over_budget(sources, size - max_size)
            if not dropped:
                ui.warn(f"the bundle is {size:,} bytes: over --max-size with nothing left to drop")
                break
            for name in dropped:
                ui.say(f"over the size budget: leaving out {name}")
                del sources[name]
            left_out += dropped
        lines = job_text.summary_lines(
            parts, failing, count, out, size, data=manifest["data"], modules=manifest["modules"]
        )
        lines += inputs.notes
        code = _exit_code(failing, rejudged)
        return Merged(out, size, manifest, failing.index, count, code, tuple(lines))


def _spent(name: str, path: Path, inputs: stitch.Stitched) -> bool:
    """Whether ``name`` is a shards file the merged bundle has no use for: one the stitched
    arrays stand for, or another part's (they serve only to stitch). The failing part's
    others stay, as all its files do."""
    if path in inputs.used:
        return True
    return re.match(rf"{PARTS_DIR}/part-\d+/{members.SHARDS}/", name) is not None


def _exit_code(failing: Part, rejudged: stitched_replay.Rejudged) -> ExitCode:
    """As collect would exit for the merged manifest's verdicts: a failure reproduced (on
    the stitched inputs or by the part's own replay) is 0."""
    if failing.weight() == 0:
        return ExitCode.NO_FAILURE
    if failing.taken_down or not rejudged.reproduced:
        return ExitCode.NOT_REPRODUCED
    # 0 only for XLA's bug, proven (a part of an older version says nothing of whose).
    if rejudged.blame is not None and rejudged.blame.get("whose") != "xla":
        return ExitCode.NOT_REPRODUCED
    return ExitCode.OK


def _kept_modules(
    parts: Sequence[Part], failing: Part
) -> tuple[dict[int, list[ModuleEntry]], dict[tuple[int, str], str]]:
    """Each part's modules that are kept, and for the others which kept one they equal
    ("module_0010.jit_train_step of part 1")."""
    seen: dict[str, str] = {}
    kept: dict[int, list[ModuleEntry]] = {}
    same_as: dict[tuple[int, str], str] = {}
    for part in [failing, *(p for p in parts if p is not failing)]:
        kept[part.index] = []
        for module in part.manifest["modules"]:
            key = fingerprint(part, module)
            if key is not None and key in seen and part is not failing:
                same_as[(part.index, module["label"])] = seen[key]
                continue
            if key is not None:
                seen.setdefault(key, f"{module['label']} of part {part.index}")
            kept[part.index].append(module)
    return kept, same_as


def _sources(
    parts: Sequence[Part], failing: Part, kept: dict[int, list[ModuleEntry]]
) -> dict[str, Path]:
    """The merged bundle's files (arcname -> unpacked file), ISSUE.md and manifest.json aside."""
    sources: dict[str, Path] = {}
    for path in failing.bundle.files:
        name = path.relative_to(failing.bundle.root).as_posix()
        if name not in (members.MANIFEST, members.ISSUE):
            sources[name] = path
    for part in parts:
        if part is failing:
            continue
        mine = set().union(*(_module_dirs(m) for m in kept[part.index]))
        every = set().union(*(_module_dirs(m) for m in part.manifest["modules"]))
        for path in part.bundle.files:
            name = path.relative_to(part.bundle.root).as_posix()
            folder = "/".join(name.split("/")[:2])
            if name in _PART_FILES_LEFT or (folder in every and folder not in mine):
                continue
            sources[f"{PARTS_DIR}/part-{part.index}/{name}"] = path
    return sources


def _over_budget(sources: dict[str, Path], excess: int) -> list[str]:
    """The other parts' files that go first when the whole is over budget: their modules'
    files, largest first, then their logs, until they hold as much as the excess."""
    others = [n for n in sources if n.startswith(f"{PARTS_DIR}/")]
    ranked = sorted(
        (n for n in others if not n.endswith(f"/{members.MANIFEST}")),
        key=lambda n: (f"/{_MODULES}/" not in n, -sources[n].stat().st_size),
    )
    dropped, freed = [], 0
    for name in ranked:
        if freed >= excess:
            break
        dropped.append(name)
        freed += sources[name].stat().st_size
    return dropped


def _stage(
    stage: Path,
    sources: dict[str, Path],
    parts: Sequence[Part],
    failing: Part,
    count: int,
    same_as: dict[tuple[int, str], str],
    out: Path,
    left_out: Sequence[str],
    inputs: stitch.Stitched,
    rejudged: stitched_replay.Rejudged,
) -> Manifest:
    if stage.exists():
        shutil.rmtree(stage)
    for name, source in sources.items():
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
    old_name = failing.bundle.path.name
    report = failing.bundle.root / members.ISSUE
    if report.is_file():
        text = report.read_text("utf-8").replace(old_name, out.name)
        text = stitched_replay.reissued(text, failing.manifest, rejudged)
        section = job_text.issue_section(parts, failing, count, same_as)
        (stage / members.ISSUE).write_text(job_text.with_section(text, section), "utf-8")
    record: dict[str, Any] = dict(failing.manifest)
    record["job"] = {
        **(failing.manifest.get("job") or {"from": "the process's rank"}),
        "part": failing.index,
        "parts": count,
        "merged": [job_text.part_record(p, failing, same_as) for p in parts],
    }
    record["title"] = rejudged.title
    if rejudged.blame is not None:
        record["blame"] = rejudged.blame
    record["modules"] = [_with_inputs(m, inputs) for m in rejudged.modules]
    record["data"] = inputs.data_text(failing.manifest["data"])
    if rejudged.unstitched and not inputs.snapshots:
        record["data"] += (
            "; merge stitched them, and the module did not reproduce on them: it replays on "
            "the inputs its part's replay reproduced it on"
        )
    notes = rejudged.notes(failing.manifest["notes"])
    notes = [n for n in notes if not rejudged.replayed or not _no_inputs(n)]
    notes.append(job_text.merged_note(parts, failing, count))
    notes += inputs.notes
    notes += rejudged.lines
    if left_out:
        notes.append(f"left out for the size budget: {len(left_out)} files of the other parts")
    record["notes"] = notes
    record["files"] = file_entries(stage)
    manifest = validate(record)
    write_manifest(stage, manifest)
    return manifest


def _with_inputs(module: ModuleEntry, inputs: stitch.Stitched) -> ModuleEntry:
    """A module's entry with the snapshot of its stitched inputs in place of its shards."""
    found = inputs.snapshots.get(module["label"])
    if found is None:
        return module
    files = {r: p for r, p in module["files"].items() if r != Role.SHARDS.value}
    return {**module, "files": {**files, Role.SNAPSHOT.value: found[0]}}


def _no_inputs(note: str) -> bool:
    """A part's note that no module had real inputs: said of the part, not of the merged
    bundle whose modules were replayed on their stitched inputs."""
    return note.startswith("no module has real inputs")
