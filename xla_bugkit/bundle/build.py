"""Fill a bundle's staging folder: module files, ISSUE.md, environment, log tail, manifest."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xla_bugkit import envinfo
from xla_bugkit.bundle import issue, layout, manifest
from xla_bugkit.bundle.layout import Planned
from xla_bugkit.bundle.manifest import Manifest, ModuleEntry
from xla_bugkit.capture.dumps import DumpIndex, Role
from xla_bugkit.capture.rerun import RunRecord
from xla_bugkit.capture.selection import Chosen, Selection
from xla_bugkit.redact import Redactor, summarize
from xla_bugkit.replay.judge import Verdict

LOG_TAIL_BYTES = 256 * 1024  # the bundled log: the end is where the failure is
ISSUE = "ISSUE.md"


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
) -> Manifest:
    """Write everything that goes into the archive under ``stage``; return the manifest."""
    planned = [p for p in layout.plan(index, selection.chosen, data=data)
               if p.arcname not in dropped]  # fmt: skip
    counts = layout.stage(planned, stage, redactor)
    text = redactor.text
    log_tail, found = redactor.text_with_report(_tail(run.output, LOG_TAIL_BYTES))
    counts.update(found)
    layout.write_text(stage, "log.txt", log_tail)
    others = "\n".join(selection.others)
    layout.write_text(stage, "other-modules.txt", f"{others}\n" if others else "")
    layout.write_text(stage, "environment.txt", env.to_text())
    modules = [module_entry(c, planned) for c in selection.chosen]
    by_name = {v.module: v for v in verdicts}
    for m in modules:
        v = by_name.get(m["label"])
        m["replay"] = v.to_json() if v else None
    notes = [text(n) for n in (*run.xla_flags.notes, *problems)]
    if not data:
        notes.append("no input data shipped (--no-data): replay uses generated inputs")
    notes += [f"left out to fit the size budget: {name}" for name in dropped]
    if counts:
        notes.append(f"redacted: {summarize(counts)}")
    title, body = render(run, selection, verdicts, env, text, bundle_name)
    layout.write_text(stage, ISSUE, body)
    record: Manifest = {
        "schema": manifest.SCHEMA_VERSION,
        "tool": manifest.tool_name(),
        "title": title,
        "created": manifest.now(),
        "versions": dict(env.versions),
        "command": [text(a) for a in run.command],
        "xla_flags": [text(f) for f in run.xla_flags.user_flags],
        "exit_status": run.exit_status,
        "failure": {
            k: text(v) if isinstance(v, str) else v for k, v in run.failure.to_json().items()
        },
        "guess": selection.guess,
        "modules": modules,
        "other_modules": len(selection.others),
        "data": _data_text(data, planned, dropped),
        "notes": notes,
        "files": manifest.file_entries(stage),
    }
    manifest.write_manifest(stage, record)
    return record


def _data_text(data: bool, planned: Sequence[Planned], dropped: Sequence[str]) -> str:
    if not data:
        return "no input data (--no-data)"
    if any(".snapshot." in name for name in dropped):
        kept = sum(p.role is Role.SNAPSHOT for p in planned)
        return f"real inputs (snapshots): {kept} kept, the rest left out to fit the size budget"
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
    text: Any,
    bundle_name: str,
) -> tuple[str, str]:
    """The issue's suggested title and its body (ISSUE.md)."""
    f = run.failure
    platform = next((c.module.platform for c in selection.chosen if c.module.platform), None)
    title = issue.title_for(f.kind.value, text(f.signature or f.headline), platform=platform)
    verdict_rows = [(v.module, v.outcome.value, text(v.evidence)) for v in verdicts]
    reproduced = any(v.reproduced for v in verdicts)
    replay_line = (
        "The bundle's replay reproduces the failure without the original program."
        if reproduced
        else "The bundle's replay did not reproduce the failure on the reporter's machine."
    )
    description = (
        f"Running the program below ends in a **{f.kind.value}**. {replay_line}\n\n"
        f"xla-bugkit chose {len(selection.chosen)} of "
        f"{len(selection.chosen) + len(selection.others)} dumped modules"
        + (" (a guess: nothing in the failure named a module)." if selection.guess else ".")
    )
    ctx = issue.IssueContext(
        title=title,
        failure_kind=f.kind.value,
        signature=text(f.headline),
        description=description,
        command=text(shlex.join(run.command)),
        exit_status=_exit_text(run),
        verify_command=f"xla-bugkit verify {bundle_name}",
        system_info=env.to_text(),
        log_tail=text(_tail(run.output, 64 * 1024)),
        jax_version=env.version("jax"),
        jaxlib_version=env.version("jaxlib"),
        bundle_name=bundle_name,
        selected_modules=[(c.module.label, "; ".join(c.reasons)) for c in selection.chosen],
        replay_verdicts=verdict_rows,
    )
    return title, issue.render_issue(ctx)


def _exit_text(run: RunRecord) -> str:
    if run.timed_out:
        return "killed after the timeout"
    if run.failure.signal:
        return f"killed by {run.failure.signal}"
    return f"exit status {run.exit_status}"


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
