"""Fill a bundle's staging folder: module files, repro.py and its arrays, the script (when
asked), ISSUE.md, environment, log tail, manifest."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import frameworks
from xla_bugkit.bundle import (
    envinfo,
    extras,
    framework_text,
    issue,
    layout,
    manifest,
    members,
    repro,
    trackers,
    triage,
)
from xla_bugkit.bundle.layout import Planned
from xla_bugkit.bundle.manifest import Manifest, ModuleEntry
from xla_bugkit.bundle.repro import Repro
from xla_bugkit.bundle.source import add_source
from xla_bugkit.choose.dumps import DumpIndex, Role
from xla_bugkit.choose.selection import Chosen, Selection
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.hlo.generated import SEED
from xla_bugkit.redact import Redactor, summarize
from xla_bugkit.replay import native
from xla_bugkit.replay.verdict import Verdict
from xla_bugkit.run import arguments, processes
from xla_bugkit.run.rerun import RunRecord

LOG_TAIL_BYTES = 256 * 1024  # the bundled log: the end is where the failure is
INLINE_MODULE_LINES = 60  # a module this short is shown in ISSUE.md itself

Redact = Callable[[str], str]


@dataclass(frozen=True)
class Staged:
    """What the staged bundle holds besides the dump files, for the issue text."""

    repro: Repro | None
    source: str | None  # the script's path in the bundle
    replayed: bool  # the replay stage ran (False: --no-replay)
    framework: frameworks.FrameworkInfo | None = None  # the program's, when it is known
    repo: str | None = None  # the tracker the user named (--repo); None: the framework's
    # Why the run's real inputs are not in the bundle (--no-data, the size budget); "" when
    # they are, or there were none.
    inputs_left_out: str = ""
    jaxpr: tuple[str, str] = ("", "")  # the module's jaxpr: its member name, and its short text


def build(
    stage: Path,
    *,
    index: DumpIndex,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    redactor: Redactor,
    env: envinfo.EnvReport,
    data: bool,
    bundle_name: str,
    dropped: Sequence[str] = (),
    problems: Sequence[str] = (),
    arrays: Path | None = None,
    include_source: bool = False,
    replayed: bool = True,
    cwd: Path | None = None,
    repo: str | None = None,
) -> Manifest:
    """Write everything that goes into the archive under ``stage``; return the manifest.

    ``arrays`` holds the replay's saved outputs, one folder per module label (expected.npz
    and the wrong values come from there); ``include_source`` adds the command's script,
    found relative to ``cwd`` (default: the current folder).
    """
    planned = [
        p for p in layout.plan(index, selection.chosen, data=data) if p.arcname not in dropped
    ]
    unredacted: list[str] = []  # what binary files still hold: said after the summary
    counts = layout.stage(planned, stage, redactor, unredacted)
    counts.update(_write_texts(stage, run, selection, env, redactor))
    text = redactor.text
    modules = _module_entries(selection.chosen, planned, verdicts)
    notes = [text(n) for n in (*run.xla_flags.notes, *problems)]
    first = selection.chosen[0].module.name if selection.chosen else None
    saw = text(triage.headline(triage.triage(run.failure, verdicts, module=first), run.failure))
    target = _target(selection.chosen, planned, verdicts, arrays)
    user_flags = [text(f) for f in run.flags_in_force]
    reproducer = _reproducer(stage, target, saw, run.failure.kind, user_flags, notes)
    source = None
    if include_source:
        source = _source(stage, run.command, redactor, cwd or Path.cwd(), notes, counts)
    if not data:
        notes.append("no input data shipped (--no-data): replay uses generated inputs")
    notes += extras.pass_dump_notes(planned, dropped)
    passes = f"/{layout.PASSES}/"
    notes += [f"left out to fit the size budget: {n}" for n in dropped if passes not in n]
    if counts:
        notes.append(f"redacted: {summarize(counts)}")
    notes += unredacted
    found = frameworks.detect(run.command, run.output, (m.name for m in index.modules))
    framework = frameworks.info(found) if found is not None else None
    left_out = (
        "--no-data"
        if not data
        else "left out to fit the size budget"
        if any(".snapshot." in name for name in dropped)
        else ""
    )
    shown = reproducer.module if reproducer else (planned[0].module if planned else "")
    jaxpr = extras.jaxpr_inline(stage, planned, shown)
    staged = Staged(reproducer, source, replayed, framework, repo, left_out, jaxpr)
    title, body = render(run, selection, verdicts, env, text, bundle_name, stage, staged)
    layout.write_text(stage, members.ISSUE, body)
    data_text = framework_text.inputs_text(framework, _data_text(data, planned, dropped))
    record = _manifest(run, selection, env, text, title, modules, notes, data_text)
    if run.culprit is not None:
        record["process"] = processes.process_record(run.culprit)
        record["other_processes"] = processes.other_records(run.culprit)
    if framework is not None:
        record["framework"] = framework.to_json()
    record["files"] = manifest.file_entries(stage)
    manifest.write_manifest(stage, record)
    return record


def _write_texts(
    stage: Path, run: RunRecord, selection: Selection, env: envinfo.EnvReport, redactor: Redactor
) -> Counter[str]:
    """log.txt, other-modules.txt and environment.txt; returns what the log had redacted."""
    # XLA's "Dumping ..." lines name every file of the dump (most of a long run's output);
    # selection has read them, and the bundle holds the files themselves.
    log = xla_log.without_dump_lines(run.output)
    log_tail, counts = redactor.text_with_report(_tail(log, LOG_TAIL_BYTES))
    layout.write_text(stage, members.LOG, log_tail)
    others = "\n".join(selection.others)
    layout.write_text(stage, members.OTHER_MODULES, f"{others}\n" if others else "")
    layout.write_text(stage, members.ENVIRONMENT, env.to_text())
    return counts


def _module_entries(
    chosen: Sequence[Chosen], planned: Sequence[Planned], verdicts: Sequence[Verdict]
) -> list[ModuleEntry]:
    modules = [module_entry(c, planned) for c in chosen]
    by_name = {v.module: v for v in verdicts}
    for m in modules:
        v = by_name.get(m["label"])
        m["replay"] = v.to_json() if v else None
    return modules


def _reproducer(
    stage: Path,
    target: repro.Target | None,
    saw: str,
    kind: Kind,
    user_flags: Sequence[str],
    notes: list[str],
) -> Repro | None:
    """repro.py and its arrays (all text redacted already); why any of them is missing goes
    to ``notes``."""
    if target is None:
        return None
    reproducer = repro.write(stage, target, saw=saw, kind=kind, user_flags=user_flags)
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
    text: Redact,
    title: str,
    modules: list[ModuleEntry],
    notes: list[str],
    data: str,
) -> Manifest:
    return {
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
    }


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


_NO_XLA_SNAPSHOT = "saved before the first call of each function, and of each multi-device call"


def _data_text(data: bool, planned: Sequence[Planned], dropped: Sequence[str]) -> str:
    if not data:
        return "no input data (--no-data)"
    kept = sum(p.role is Role.SNAPSHOT for p in planned)
    left_out = any(".snapshot." in name for name in dropped)
    if kept == 0 and left_out:
        return "no real inputs: the snapshots were left out to fit the size budget"
    if kept == 0:
        return "no real inputs: XLA recorded no execution of the chosen modules"
    if left_out:
        return f"real inputs (snapshots): {kept} kept, the rest left out to fit the size budget"
    if all(arguments.is_recorded(p.arcname) for p in planned if p.role is Role.SNAPSHOT):
        return f"real inputs (recorded by the capture hook: {_NO_XLA_SNAPSHOT})"
    return "real inputs (snapshots)"


def _tail(output: str, limit: int) -> str:
    if len(output) <= limit:
        return output
    cut = output[-limit:]
    first_full_line = cut[cut.find("\n") + 1 :]
    return f"[... {len(output) - limit} earlier characters not kept ...]\n{first_full_line}"


def render(
    run: RunRecord,
    selection: Selection,
    verdicts: Sequence[Verdict],
    env: envinfo.EnvReport,
    text: Redact,
    bundle_name: str,
    stage: Path | None = None,
    staged: Staged | None = None,
) -> tuple[str, str]:
    """The issue's suggested title and its body (ISSUE.md)."""
    staged = staged or Staged(None, None, replayed=bool(verdicts))
    f = run.failure
    platform = next((c.module.platform for c in selection.chosen if c.module.platform), None)
    first = selection.chosen[0].module.name if selection.chosen else None
    judged = triage.triage(f, verdicts, module=first)
    title = text(triage.title(judged, f, platform))
    rep = staged.repro
    inline = _module_inline(stage, rep)
    ctx = issue.IssueContext(
        title=title,
        failure_kind=judged.what,
        signature=text(_key_line(judged, f)),
        description=text(_description(judged, f, selection, verdicts, staged)),
        command=text(shlex.join(run.command)),
        exit_status=_exit_text(run),
        verify_command=f"xla-bugkit verify {bundle_name}",
        install=envinfo.install_command(),
        system_info=env.to_text(),
        # XLA's "Dumping ..." lines are collect's doing: the report shows the program's.
        log_tail=text(_tail(xla_log.without_dump_lines(run.output), 64 * 1024)),
        jax_version=env.version("jax"),
        jaxlib_version=env.version("jaxlib"),
        bundle_name=bundle_name,
        selected_modules=[(c.module.label, "; ".join(c.reasons)) for c in selection.chosen],
        replay_verdicts=[(v.module, v.outcome.value, text(v.evidence)) for v in verdicts],
        replay_note=_replay_note(staged),
        repro_command=f"python {members.REPRO}" if rep and rep.script else "",
        hlo_command=rep.hlo_command if rep else "",
        module_label=rep.module if rep and inline else "",
        module_text=inline,
        jaxpr=staged.jaxpr,
        wrong_values=rep.wrong_values if rep else (),
        reference=rep.reference if rep else "",
        inputs=_inputs_text(rep),
        native_only=_native_only(verdicts),
        form=trackers.form(_tracker(staged, verdicts)),
        fields=trackers.fields(env, f, staged.framework, platform),
    )
    return title, issue.render_issue(ctx)


def _native_only(verdicts: Sequence[Verdict]) -> str:
    """The framework's XLA, when only the replay under it showed the failure."""
    for v in verdicts:
        if v.reproduced and v.second is not None and not v.second.reproduced:
            return v.under
    return ""


def _tracker(staged: Staged, verdicts: Sequence[Verdict]) -> str:
    name = staged.framework.name if staged.framework else None
    return trackers.destination(name, verdicts, staged.repo)


def _description(
    judged: triage.Triage,
    failure: Failure,
    selection: Selection,
    verdicts: Sequence[Verdict],
    staged: Staged,
) -> str:
    """Markdown: what happened, what the replay showed, what xla-bugkit chose."""
    lines = [triage.sentence(judged, failure)]
    if judged.xla:
        lines.append(_replay_line(judged, verdicts, staged))
    paragraphs = [" ".join(lines)]
    label = native.replay_label(verdicts)
    if staged.framework and (
        said := framework_text.describe(staged.framework, bool(verdicts), label)
    ):
        paragraphs.append(issue.plain(said))
    if staged.source:
        paragraphs.append(
            f"The program's script is attached as {issue.code_span(staged.source)} (redacted)."
        )
    total = len(selection.chosen) + len(selection.others)
    guess = " (a guess: nothing in the failure named a module)" if selection.guess else ""
    paragraphs.append(f"xla-bugkit chose {len(selection.chosen)} of {total} dumped modules{guess}.")
    return "\n\n".join(paragraphs)


def _replay_line(judged: triage.Triage, verdicts: Sequence[Verdict], staged: Staged) -> str:
    if judged.verdict is not None:
        module = issue.code_span(judged.verdict.module)
        if judged.verdict.inputs == "snapshot" and staged.inputs_left_out:
            # Said as it is: what the bundle holds may not show it.
            return (
                f"The replay of {module} showed it on the run's real inputs, which this bundle "
                f"leaves out ({issue.plain(staged.inputs_left_out)}): replayed from the bundle, "
                "it runs on generated inputs, which may not show it."
            )
        return f"Replaying {module} from the bundle reproduces it without the original program."
    if verdicts:
        return "The bundle's replay did not reproduce it on the reporter's machine."
    if not staged.replayed:
        return "The replay was skipped (`--no-replay`): nothing shows yet that it reproduces."
    return "No chosen module could be replayed (none has a before-optimizations proto)."


def _key_line(judged: triage.Triage, failure: Failure) -> str:
    # A wrong result's key line is the replay's numbers, not the program's own check.
    if judged.what == "wrong result" and judged.verdict is not None:
        return judged.verdict.evidence
    return failure.headline


def _replay_note(staged: Staged) -> str:
    return "None: the replay was skipped (--no-replay)." if not staged.replayed else ""


def _module_inline(stage: Path | None, rep: Repro | None) -> str:
    """The module's HLO text, for ISSUE.md to show when it is short ("" when it is not)."""
    if stage is None or rep is None or not rep.before_text:
        return ""
    body = (stage / rep.before_text).read_text("utf-8", "replace")
    return body if len(body.rstrip("\n").splitlines()) <= INLINE_MODULE_LINES else ""


def _inputs_text(rep: Repro | None) -> str:
    if rep is None or not rep.inputs:
        return ""
    if rep.recorded_inputs:
        where = "the reporter's, in the snapshot"
    elif rep.extreme_inputs:
        where = f"{rep.extreme_inputs}, in inputs.npz: the values the replay showed it on"
    else:
        where = f"generated from seed {SEED}"
    return f"{rep.inputs} ({where})"


def _exit_text(run: RunRecord) -> str:
    if run.timed_out:
        return "killed after the timeout"
    if run.interrupted:
        return "stopped by the user"
    if run.failure.signal:
        return f"killed by {run.failure.signal}"
    return f"exit status {run.exit_status}"


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
