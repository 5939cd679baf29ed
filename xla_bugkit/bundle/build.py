"""Fill a bundle's staging folder: module files, repro.py and its arrays, the script (when
asked), ISSUE.md, environment, log tail, manifest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from xla_bugkit import frameworks
from xla_bugkit.bundle import (
    envinfo,
    extras,
    framework_text,
    layout,
    manifest,
    members,
    report,
    repro,
    triage,
    wording,
)
from xla_bugkit.bundle.layout import Planned
from xla_bugkit.bundle.manifest import Manifest, ModuleEntry
from xla_bugkit.bundle.repro import Repro
from xla_bugkit.bundle.source import add_source
from xla_bugkit.choose.dumps import DumpIndex, Role
from xla_bugkit.choose.selection import Chosen, Selection
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Kind
from xla_bugkit.redact import Redactor, summarize
from xla_bugkit.run import arguments, hook, processes
from xla_bugkit.run.record import RunRecord
from xla_bugkit.verdict import Verdict

LOG_TAIL_BYTES = 256 * 1024  # the bundled log: the end is where the failure is


@dataclass(frozen=True)
class BundleInputs:
    """What a bundle is made of: the run, its dumps' index and the modules chosen from it,
    the replays' verdicts and arrays, and the machine's redactor and environment report."""

    index: DumpIndex
    selection: Selection
    run: RunRecord
    verdicts: Sequence[Verdict]
    redactor: Redactor
    env: envinfo.EnvReport
    problems: Sequence[str] = ()  # what reading the dumps found wrong: notes in the bundle
    arrays: Path | None = None  # the replays' saved outputs, one folder per module label
    # The failing module's replay on generated inputs, when the budget left its real ones out.
    as_bundled: Verdict | None = None


@dataclass(frozen=True)
class BundleAsked:
    """What the user asked of the bundle."""

    bundle_name: str
    data: bool = True  # ship the inputs (--no-data: not)
    include_source: bool = False  # add the command's script, found relative to ``cwd``
    replayed: bool = True  # the modules were replayed (--no-replay: not)
    repo: str | None = None  # the tracker asked for, or None: the framework's
    cwd: Path | None = None  # default: the current folder


def build(
    stage: Path, inputs: BundleInputs, asked: BundleAsked, *, dropped: Sequence[str] = ()
) -> Manifest:
    """Write everything that goes into the archive under ``stage``, less ``dropped`` (what
    the size budget left out); return the manifest."""
    index, selection, run, verdicts = inputs.index, inputs.selection, inputs.run, inputs.verdicts
    redactor, env, arrays = inputs.redactor, inputs.env, inputs.arrays
    data, bundle_name = asked.data, asked.bundle_name
    planned = [
        p for p in layout.plan(index, selection.chosen, data=data) if p.arcname not in dropped
    ]
    unredacted: list[str] = []  # what binary files still hold: said after the summary
    counts = layout.stage(planned, stage, redactor, unredacted)
    counts.update(_write_texts(stage, run, selection, env, redactor))
    text = redactor.text
    modules = _module_entries(selection.chosen, planned, verdicts)
    for m in modules:  # options the program passed to this compile: XLA_FLAGS never shows them
        if own := run.compile_options(m["label"]):
            m["compiler_options"] = [text(o) for o in own]
    notes = [text(n) for n in (*run.xla_flags.notes, *inputs.problems)]
    first = selection.chosen[0].module.name if selection.chosen else None
    judged = triage.of_run(run, verdicts, module=first)
    saw = text(wording.headline(judged, run.failure))
    target = _target(selection.chosen, planned, verdicts, arrays)
    user_flags = [text(f) for f in run.flags_in_force]
    tpu_args = [text(f) for f in run.tpu_args_in_force]
    reproducer = _reproducer(
        stage, target, saw, run.failure.kind, (user_flags, tpu_args), notes, run.memory_cap
    )
    source = None
    if asked.include_source:
        source = _source(stage, run.command, redactor, asked.cwd or Path.cwd(), notes, counts)
    if not data:
        notes.append("no input data shipped (--no-data): replay uses generated inputs")
    notes += extras.pass_dump_notes(planned, dropped)
    passes = f"/{layout.PASSES}/"
    notes += [f"left out to fit the size budget: {n}" for n in dropped if passes not in n]
    if counts:
        notes.append(f"redacted: {summarize(counts)}")
    notes += unredacted
    found = frameworks.detect(run.command, run.output, (m.name for m in index.modules))
    framework = frameworks.info(found, run.versions) if found is not None else None
    left_out = (
        "--no-data"
        if not data
        else "left out to fit the size budget"
        if any(".snapshot." in name for name in dropped)
        else ""
    )
    shown = reproducer.module if reproducer else (planned[0].module if planned else "")
    jaxpr = extras.jaxpr_inline(stage, planned, shown)
    staged = report.Staged(
        reproducer, source, asked.replayed, framework, asked.repo, left_out, jaxpr,
        inputs.as_bundled,
    )  # fmt: skip
    title, body = report.render(run, selection, verdicts, env, text, bundle_name, stage, staged)
    layout.write_text(stage, members.ISSUE, body)
    data_text = framework_text.inputs_text(framework, _data_text(data, planned, dropped, run))
    record = _manifest(run, selection, env, text, title, modules, notes, data_text, judged)
    if run.culprit is not None:
        record["process"] = process_entry(run.culprit)
        record["other_processes"] = other_process_entries(run.culprit)
    if framework is not None:
        record["framework"] = framework.to_json()
    if run.job is not None:
        record["job"] = cast("manifest.JobEntry", dict(run.job))  # collecting.job's record
    record["files"] = manifest.file_entries(stage)
    manifest.write_manifest(stage, record)
    return record


def _write_texts(
    stage: Path, run: RunRecord, selection: Selection, env: envinfo.EnvReport, redactor: Redactor
) -> Counter[str]:
    """log.txt, other-modules.txt and environment.txt; returns what the log had redacted."""
    # XLA's "Dumping ..." lines name every file of the dump (most of a long run's output);
    # selection has read them, and the bundle holds the files themselves.
    log = hook.without_own_frames(xla_log.without_dump_lines(run.output))
    log_tail, counts = redactor.text_with_report(report.log_tail(log, LOG_TAIL_BYTES))
    layout.write_text(stage, members.LOG, log_tail)
    others = "\n".join(selection.others)
    layout.write_text(stage, members.OTHER_MODULES, f"{others}\n" if others else "")
    layout.write_text(stage, members.ENVIRONMENT, env.to_text())
    return counts


def _module_entries(
    chosen: Sequence[Chosen], planned: Sequence[Planned], verdicts: Sequence[Verdict]
) -> list[ModuleEntry]:
    """The chosen modules, those whose replay reproduced the failure first (in the order the
    evidence ranked them): the module the evidence put first may not be the one that fails."""
    modules = [module_entry(c, planned) for c in chosen]
    by_name = {v.module: v for v in verdicts}
    for m in modules:
        v = by_name.get(m["label"])
        m["replay"] = v.to_json() if v else None
    return sorted(modules, key=lambda m: not _reproduced(by_name.get(m["label"])))


def _reproducer(
    stage: Path,
    target: repro.Target | None,
    saw: str,
    kind: Kind,
    run_flags: tuple[Sequence[str], Sequence[str]],
    notes: list[str],
    memory_cap: int | None,
) -> Repro | None:
    """repro.py and its arrays (all text redacted already); why any of them is missing goes
    to ``notes``. ``run_flags``: the run's XLA_FLAGS in force and its LIBTPU_INIT_ARGS."""
    if target is None:
        return None
    user_flags, tpu_args = run_flags
    reproducer = repro.write(
        stage,
        target,
        saw=saw,
        kind=kind,
        user_flags=user_flags,
        memory_cap=memory_cap,
        tpu_args=tpu_args,
    )
    notes += reproducer.notes if reproducer else ()
    return reproducer


def _source(
    stage: Path,
    command: Sequence[str],
    redactor: Redactor,
    cwd: Path,
    notes: list[str],
    counts: Counter[str],
) -> str | None:
    """The script, for --include-source; its redactions go to ``counts``."""
    added = add_source(stage, command, redactor, cwd)
    counts.update(added.counts)
    notes += [redactor.text(added.note)] if added.note else []
    return added.arcname


def _manifest(
    run: RunRecord,
    selection: Selection,
    env: envinfo.EnvReport,
    text: report.Redact,
    title: str,
    modules: list[ModuleEntry],
    notes: list[str],
    data: str,
    judged: triage.Triage,
) -> Manifest:
    written: Manifest = {
        "schema": manifest.SCHEMA_VERSION,
        "tool": manifest.tool_name(),
        "title": title,
        "created": manifest.now(),
        "versions": dict(env.versions),
        "command": [text(a) for a in run.command],
        # In force in the failing process: flags the program set itself included.
        "xla_flags": [text(f) for f in run.flags_in_force],
        "exit_status": run.exit_status,
        "failure": {
            k: text(v) if isinstance(v, str) else v for k, v in run.failure.to_json().items()
        },
        "guess": selection.guess,
        "modules": modules,
        "other_modules": len(selection.others),
        "data": data,
        "notes": notes,
        "files": [],
        "blame": {"whose": judged.whose, "reason": text(judged.reason)},
    }
    if run.tpu_args_in_force:  # absent otherwise: older readers never see it
        written["libtpu_init_args"] = [text(f) for f in run.tpu_args_in_force]
    return written


def _target(
    chosen: Sequence[Chosen],
    planned: Sequence[Planned],
    verdicts: Sequence[Verdict],
    arrays: Path | None,
) -> repro.Target | None:
    """The module repro.py runs: the first that reproduced, else the first chosen one, of
    those whose before-optimizations proto is in the bundle."""
    by_name = {v.module: v for v in verdicts}
    ordered = sorted(chosen, key=lambda c: not _reproduced(by_name.get(c.module.label)))
    for c in ordered:
        label = c.module.label
        files = extras.files_by_role(planned, label)
        if Role.BEFORE_PROTO.value in files:
            folder = arrays / label if arrays is not None else None
            return repro.Target(label, files, c.module.platform, by_name.get(label), folder)
    return None


def _reproduced(verdict: Verdict | None) -> bool:
    return verdict is not None and verdict.reproduced


# What a part of a job holds of its module's inputs; ``merge`` makes them whole.
SHARDS_ONLY = "this process's shards of the job's inputs, which merge puts together from every part"
_NO_XLA_SNAPSHOT = "saved before the first call of each function, and of each multi-device call"


def _data_text(
    data: bool, planned: Sequence[Planned], dropped: Sequence[str], run: RunRecord | None = None
) -> str:
    if not data:
        return "no input data (--no-data)"
    kept = sum(p.role is Role.SNAPSHOT for p in planned)
    left_out = any(".snapshot." in name for name in dropped)
    if kept == 0 and left_out:
        return "no real inputs: the snapshots were left out to fit the size budget"
    if kept == 0 and any(p.role is Role.SHARDS for p in planned):
        return f"no real inputs: {SHARDS_ONLY}"
    if kept == 0:
        return "no real inputs: XLA recorded no execution of the chosen modules"
    if left_out:
        return f"real inputs (snapshots): {kept} kept, the rest left out to fit the size budget"
    snapshots = [p.arcname for p in planned if p.role is Role.SNAPSHOT]
    if all(arguments.is_recorded(name) for name in snapshots):
        read = _read_under_way(run)
        if any(f".snapshot.{arguments.RECORDED}-{n}." in name for n in read for name in snapshots):
            return (
                f"real inputs (recorded by the capture hook: {_NO_XLA_SNAPSHOT}; and those of "
                "the call still under way at the stop, read where it was called)"
            )
        return f"real inputs (recorded by the capture hook: {_NO_XLA_SNAPSHOT})"
    return "real inputs (snapshots)"


def _read_under_way(run: RunRecord | None) -> set[int]:
    """The executions whose arguments the hook read at the stop (``Event.seen``)."""
    culprit = run.culprit if run is not None else None
    if culprit is None:
        return set()
    return {e.n for e in culprit.process.events if e.seen and e.args is not None}


def module_entry(c: Chosen, planned: Sequence[Planned]) -> ModuleEntry:
    files = extras.files_by_role(planned, c.module.label)
    return {
        "label": c.module.label,
        "name": c.module.name,
        "id": c.module.id,
        "platform": c.module.platform,
        "reasons": list(c.reasons),
        "files": files,
        "replay": None,
    }


def process_entry(culprit: processes.Culprit) -> manifest.ProcessEntry:
    """The failing process, as the manifest's ``process`` records it (no argv or paths:
    the manifest is public, and they are the machine's)."""
    p = culprit.process
    return {
        "pid": p.pid,
        "rank": p.rank,
        "processes": p.processes,
        "devices": p.devices,
        "platform": p.platform,
        "why": culprit.why,
        "memory_cap": processes.memory_cap(p),
    }


def other_process_entries(culprit: processes.Culprit) -> list[manifest.OtherProcessEntry]:
    """The run's other processes that started XLA, each with how it ended."""
    return [{"pid": p.pid, "rank": p.rank, "ended": processes.ending(p)[1]} for p in culprit.others]
