"""What ``collect`` and ``bundle`` print at the end: what was chosen and why, the verdicts,
where the bundle is, and what to do next."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.bundle import framework_text, github, members, wording
from xla_bugkit.bundle.manifest import Manifest
from xla_bugkit.bundle.source import SOURCE_DIR
from xla_bugkit.bundle.triage import Triage
from xla_bugkit.bundle.wording import headline
from xla_bugkit.collecting import CollectResult
from xla_bugkit.collecting.workdir import replaced_dump_dir
from xla_bugkit.failure import mosaic

NO_FAILURE = "xla-bugkit: no failure seen: nothing to report (use --always to bundle anyway)"


def kept_lines(result: CollectResult) -> list[str]:
    """Where the run's files stay: the dumps of a --xla_dump_to of the user's that the run
    replaced, and the kept work dir, which ``xla-bugkit bundle`` reads."""
    lines = []
    if result.user_dumps is not None:
        theirs = f"--xla_dump_to={replaced_dump_dir(result.run)}"
        lines.append(
            f"  your dumps: {result.user_dumps} (your {theirs} was replaced for this run: "
            "nothing was written there)"
        )
    if result.workdir is not None:
        again = f"xla-bugkit bundle {shlex.quote(str(result.workdir))} -o OUT"
        lines.append(f"  work dir kept: {result.workdir} (a bundle from it again: {again})")
    return lines


def render_summary(result: CollectResult, *, verbose: bool = False, quiet: bool = False) -> str:
    """The closing lines of ``collect`` for ``result``; ``quiet`` (-q): what happened,
    the bundle, and what to do with it."""
    if result.manifest is None or result.judged is None or result.tracker is None:
        # Notes without a bundle say why there is none (a run that wrote no XLA dumps).
        return "\n".join(f"xla-bugkit: {n}" for n in result.notes) or NO_FAILURE
    if quiet:
        return "\n".join(
            [
                f"xla-bugkit: {headline(result.judged, result.run.failure)}",
                *([f"  first: {result.own_flags}"] if result.own_flags else []),
                f"  bundle: {result.bundle} ({_mb(result.size)})",
                *_across(result.across_releases),
                *_next_steps(
                    result.bundle, result.manifest["title"], result.tracker, result.judged
                ),
            ]
        )
    return summary(result, verbose=verbose)


def _across(answer: str | None) -> list[str]:
    return [f"  across releases: {answer}"] if answer else []


def summary(result: CollectResult, *, verbose: bool = False) -> str:
    """The closing lines of ``collect`` for ``result``, which wrote a bundle: what was chosen
    and why, the verdict (``judged``), what it shares, what next (no issue link to its
    tracker when nothing points at XLA)."""
    manifest, judged, tracker = result.manifest, result.judged, result.tracker
    # ``render_summary`` sends here only the result of a bundle it wrote.
    assert manifest is not None and judged is not None and tracker is not None
    run, verdicts, path, size = result.run, result.verdicts, result.bundle, result.size
    own_flags = result.own_flags
    lines = [f"\nxla-bugkit: {headline(judged, run.failure)}"]
    if own_flags is not None:
        lines.append(f"  first: {own_flags}")
    if run.culprit is not None and run.culprit.others:
        lines.append(
            f"  failing process: {run.culprit.label}: {run.culprit.why} "
            f"({len(run.culprit.others)} other "
            f"{'process' if len(run.culprit.others) == 1 else 'processes'} listed in manifest.json)"
        )
    for c in result.selection.chosen:
        lines.append(f"  selected {c.module.label}: {'; '.join(c.reasons)}")
    if (kernel := mosaic.find(run.output)) is not None:
        lines.append(f"  kernel: {kernel.line()}")
    for v in verdicts:
        under = f" under {v.under}" if v.under else ""
        inputs = f" ({v.inputs})" if v.inputs else ""  # none: refused before it read any
        lines.append(f"  replay {v.module}: {v.outcome.value}{under}{inputs}: {v.evidence}")
        lines += [f"    not applied: {w}" for w in v.withheld]
        if (second := v.second) is not None:
            lines.append(
                f"    second opinion under {second.under}: {second.outcome.value}: "
                f"{second.evidence}"
            )
    if not verdicts:
        lines.append("  replay: not run")
    elif not any(v.second for v in verdicts) and (
        label := framework_text.replay_label_of(manifest.get("framework"))
    ):
        lines.append(f"  replayed {label}")
    lines.append(f"  bundle: {path} ({_mb(size)})")
    if (part := run.job) is not None:
        of = f" of {part['parts']}" if part.get("parts") else ""
        lines.append(
            f"  job: this is part {part['part']}{of} ({part['from']}); each part of the job "
            "writes a bundle of its own, named for its part"
        )
    lines += _across(result.across_releases)
    lines += _shared(manifest, verbose, said=(own_flags,))
    if size > config.MAX_SIZE:
        lines.append(f"  note: over GitHub's {config.MAX_SIZE // 10**6} MB attachment limit")
    if result.fmt == "7z" and path is not None:
        zipped = shlex.quote(str(path.with_suffix(".zip")))
        lines.append(
            "  note: GitHub does not accept .7z attachments; to attach it there run: "
            f"xla-bugkit repack {shlex.quote(str(path))} {zipped}"
        )
    lines += _next_steps(path, manifest["title"], tracker, judged)
    return "\n".join(lines)


def _next_steps(path: Path | None, title: str, repo: str, judged: Triage) -> list[str]:
    """What to do with the bundle: file it, or, when nothing points at XLA, say so."""
    shown = shlex.quote(str(path)) if path else "BUNDLE"
    if not judged.xla:
        return [
            f"  this does not look like an XLA bug: {judged.reason}",
            "  no issue link: look into the program first; the bundle is written anyway "
            f"(xla-bugkit show --issue {shown})",
        ]
    if judged.unproven:
        # What points at XLA, but no replay outside the program showed it: no link yet.
        return [
            f"  unproven: {judged.reason}",
            "  no issue link: no replay outside the program has shown the failure to be "
            f"XLA's. {wording.UNPROVEN_TRY}; the bundle is written anyway (xla-bugkit show "
            f"--issue {shown})",
        ]
    # A link with the whole body runs to kilobytes: the terminal gets the title-only one.
    link = github.new_issue_url(repo, title, github.BODY_PLACEHOLDER)
    gh = github.gh_command(repo, title, "-")
    return [
        f"  next: read ISSUE.md (xla-bugkit show --issue {shown}), open a new issue",
        f"    on {repo}, paste ISSUE.md and attach the bundle: {link.url}",
        f"    or with GitHub's CLI: xla-bugkit show --issue {shown} | {gh}",
    ]


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _shared(manifest: Manifest, verbose: bool, said: Sequence[str | None] = ()) -> list[str]:
    """What leaves the machine: the files (all of them with -v), redactions and drops; the
    notes not ``said`` already."""
    files = manifest["files"]
    total = sum(f["size"] for f in files)
    top = [f["path"] for f in files if not f["path"].startswith(f"{members.MODULES}/")]
    modules = len(files) - len(top)
    lines = [
        f"  shares: {len(files) + 1} files, {_mb(total)} before compression: "
        f"{', '.join([*top, 'manifest.json'])} and {modules} module files"
    ]
    if verbose:
        lines += [f"    {f['size']:>10,}  {f['path']}" for f in files]
    lines += [f"  {note}" for note in manifest["notes"] if note not in said]
    lines.append(f"  inputs: {manifest['data']}")
    sources = [f["path"] for f in files if f["path"].startswith(f"{SOURCE_DIR}/")]
    if sources:
        lines.append(f"  source: {sources[0]} (the program's script, redacted)")
    elif not any(note.startswith("--include-source") for note in manifest["notes"]):
        lines.append(
            "  source: not included (off by default; collect --include-source adds the "
            "program's script, redacted)"
        )
    return lines
