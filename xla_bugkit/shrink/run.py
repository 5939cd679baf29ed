"""``shrink`` on a bundle or on a dump folder: pick the module, shrink it, write the bundle."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

from xla_bugkit._version import __version__
from xla_bugkit.bundle import manifest as mf
from xla_bugkit.bundle import members
from xla_bugkit.bundle.manifest import Manifest, ModuleEntry, open_bundle, pick_module
from xla_bugkit.bundle.manifest.pick import SHRUNK
from xla_bugkit.bundle.output import check_output
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.proc import leftovers
from xla_bugkit.replay import (
    ReplayInput,
    ReplayOptions,
    RunContext,
    as_found,
    dump_modules,
    failed,
    memory_limit,
    module_files,
    replay,
    replay_input,
)
from xla_bugkit.shrink import output
from xla_bugkit.shrink.result import ShrinkResult
from xla_bugkit.shrink.shrinker import STAGES, ShrinkOptions, shrink
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome


def parse_only(text: str) -> tuple[str, ...]:
    """``"flags,module"``: the stages to run, each one of ``STAGES``."""
    chosen = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in STAGES]
    if unknown or not chosen:
        raise BugkitError(f"--only {text!r}: choose among {', '.join(STAGES)} (comma-separated)")
    return chosen


@dataclass(frozen=True)
class Written:
    result: ShrinkResult
    bundle: Path
    verified: bool  # the shrunk module fails the same way through the normal replay

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.verified else ExitCode.NOT_REPRODUCED


def checkpoint_path(out: Path) -> Path:
    """Where the best module so far is kept while a shrink runs: if the shrink is killed,
    this is what it had found."""
    return out.with_name(out.name + ".checkpoint.hlo")


def _save_checkpoint(path: Path, text: str) -> None:
    leftovers.write_whole(path, text.encode("utf-8"))


def default_output(target: Path, *, keep_format: bool = False) -> Path:
    """``NAME.shrunk.zip`` beside ``target`` (``.tar.gz`` for a ``.tar.gz``): the shrunk
    bundle is the one to attach, and GitHub takes no ``.7z``; ``keep_format``: in
    ``target``'s own format."""
    name = target.name
    for suffix, written in ((".tar.gz", ".tar.gz"), (".tgz", ".tgz"), (".7z", ".zip"),
                            (".zip", ".zip")):  # fmt: skip
        if name.endswith(suffix):
            kept = suffix if keep_format else written
            return target.with_name(name[: -len(suffix)] + SHRUNK + kept)
    return target.with_name(name + SHRUNK + ".zip")


def shrink_bundle(
    bundle: Path,
    out: Path,
    *,
    module_re: str | None = None,
    options: ShrinkOptions | None = None,
    fmt: str | None = None,
    force: bool = False,
    ui: Ui | None = None,
    final_name: str | None = None,
) -> Written:
    """Shrink the failing module of ``bundle``; write the bundle plus the shrunk one to ``out``.
    Its ISSUE.md names the archive ``final_name`` (default: ``out``'s name) where it named
    ``bundle``."""
    ui = ui or Ui()
    options = options or ShrinkOptions()
    started = time.monotonic()
    if out.resolve() == bundle.resolve():
        raise BugkitError(f"{out} is the bundle itself: choose another output name")
    chosen_fmt = check_output(out, fmt, force=force)
    with open_bundle(bundle, prefix="xla-bugkit-shrink-") as b:
        failure = Failure.from_json(b.manifest["failure"])
        options = replace(options, context=RunContext.of_manifest(b.manifest))
        module = pick_module(b.manifest["modules"], module_re)
        inp = replay_input(module["label"], b.module_files(module), module["platform"])
        if inp is None:
            raise BugkitError(f"{module['label']} has no before-optimizations module to shrink")
        renaming = (bundle.name, final_name or out.name)
        source = _Source(b.root, b.manifest, module, inp, failure)
        return _shrink_into(source, out, chosen_fmt, options, ui, started, renaming)


@dataclass(frozen=True)
class _Source:
    """What a shrink starts from: a bundle's files (``root``, a dump's module staged as one)
    and manifest, the module to shrink and what replays it, and the failure every probe must
    show (None: a wrong result)."""

    root: Path
    manifest: Manifest
    module: ModuleEntry
    inp: ReplayInput
    failure: Failure | None


def _shrink_into(
    source: _Source,
    out: Path,
    fmt: str,
    options: ShrinkOptions,
    ui: Ui,
    started: float,
    renaming: tuple[str, str] | None = None,
) -> Written:
    inp, failure, manifest = source.inp, source.failure, source.manifest
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-shrink-work-") as tmp:
        work = Path(tmp)
        saved = checkpoint_path(out)
        shrunk = shrink(
            inp,
            failure,
            work / "probes",
            options=options,
            ui=ui,
            checkpoint=lambda c: _save_checkpoint(saved, c.text()),
        )
        stage = work / "bundle"
        shutil.copytree(source.root, stage)
        files = output.add_files(stage, shrunk, source.module["label"] + SHRUNK)
        arrays = work / "shrunk-arrays"
        with ui.phase("replaying the shrunk module"):
            verdict = output.check_replay(stage, files, inp, failure, options.timeout, arrays)
        entry = output.shrunk_entry(source.module, files, verdict) if verdict.reproduced else None
        if entry is None:
            ui.warn(f"{output.NOT_VERIFIED} ({verdict.outcome.value}: {verdict.evidence})")
        else:
            output.add_repro(stage, manifest, entry, verdict, arrays)
        if renaming is not None:
            output.rename_in_report(stage, *renaming)
        output.finish(stage, manifest, shrunk, entry, out, fmt, ui, started)
        saved.unlink(missing_ok=True)  # the bundle holds the result now
    return Written(shrunk.result, out, entry is not None)


def shrink_dump(
    dump: Path,
    out: Path,
    *,
    module_re: str | None = None,
    options: ShrinkOptions | None = None,
    fmt: str | None = None,
    force: bool = False,
    ui: Ui | None = None,
) -> Written:
    """Shrink the first module of the dump folder ``dump`` whose replay fails."""
    ui = ui or Ui()
    options = options or ShrinkOptions()
    started = time.monotonic()
    chosen_fmt = check_output(out, fmt, force=force)
    for root, m in dump_modules(dump, module_re):
        files = module_files(root, m)
        inp = replay_input(m.label, files, m.platform)
        if inp is None:
            continue
        with ui.phase(f"replaying {m.label}"):
            # A dump records no outcome: the failure its replay meets is what it shows.
            verdict = as_found(
                replay(
                    inp,
                    expected=None,
                    options=ReplayOptions(
                        timeout=options.timeout, memory_limit=memory_limit(inp.platform)
                    ),
                )
            )
        if not failed(verdict):
            ui.detail(f"{m.label}: {verdict.outcome.value}")
            continue
        wrong = verdict.outcome is Outcome.REPRODUCED_WRONG
        expected = None if wrong else verdict.failure
        with tempfile.TemporaryDirectory(prefix="xla-bugkit-shrink-dump-") as tmp:
            stage = Path(tmp)
            entry = _stage_module(stage, files, m.label, m.name, m.id, inp.platform)
            manifest = _dump_manifest(expected, entry, verdict.evidence)
            source = _Source(stage, manifest, entry, inp, expected)
            return _shrink_into(source, out, chosen_fmt, options, ui, started)
    raise BugkitError(f"no module of {dump} fails when replayed: nothing to shrink")


def _stage_module(
    stage: Path, files: dict[str, Path], label: str, name: str, number: int, platform: str
) -> ModuleEntry:
    folder = stage / "modules" / label
    folder.mkdir(parents=True)
    placed: dict[str, str] = {}
    for role, path in files.items():
        shutil.copyfile(path, folder / path.name)
        placed[role] = members.module_member(label, path.name)
    return {
        "label": label,
        "name": name,
        "id": number,
        "platform": platform,
        "reasons": ["failed when replayed from the dump"],
        "files": placed,
        "replay": None,
    }


def _versions() -> dict[str, str]:
    found = {"xla-bugkit": __version__}
    for dist in ("jax", "jaxlib"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def _dump_manifest(expected: Failure | None, entry: ModuleEntry, evidence: str) -> Manifest:
    if expected is None:
        expected = Failure(Kind.WRONG_RESULT, Phase.RUN, evidence[:300], "wrong result")
    return {
        "schema": mf.SCHEMA_VERSION,
        "tool": mf.tool_name(),
        "title": f"XLA {expected.kind.value}: {expected.headline[:80]}",
        "created": mf.now(),
        "versions": _versions(),
        "command": [],
        "xla_flags": [],
        "exit_status": None,
        "failure": expected.to_json(),
        "guess": False,
        "modules": [entry],
        "other_modules": 0,
        "data": "the dump's snapshot, if any",
        "notes": ["made by xla-bugkit shrink from a dump folder, not by collect"],
        "files": [],
    }


def shrink_in_place(bundle: Path, *, options: ShrinkOptions, ui: Ui) -> Written:
    """Shrink ``bundle`` and put the result in its place (``collect --shrink``); on any
    failure the bundle is left as it was."""
    partial = bundle.with_name("." + default_output(bundle, keep_format=True).name)
    try:
        written = shrink_bundle(
            bundle, partial, options=options, force=True, ui=ui, final_name=bundle.name
        )
        os.replace(partial, bundle)
    finally:
        partial.unlink(missing_ok=True)
    return Written(written.result, bundle, written.verified)
