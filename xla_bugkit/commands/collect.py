"""``xla-bugkit collect -- CMD``: the command line of the collect pipeline, and its summary."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import config, github
from xla_bugkit.bundle.manifest import Manifest
from xla_bugkit.capture.rerun import RunRecord
from xla_bugkit.capture.selection import Selection
from xla_bugkit.pipeline import CollectOptions, CollectResult, collect
from xla_bugkit.replay.judge import Verdict
from xla_bugkit.ui import Ui

NO_FAILURE = "xla-bugkit: no failure seen: nothing to report (use --always to bundle anyway)"


def options_from(args: argparse.Namespace, defaults: config.Config) -> CollectOptions:
    """``CollectOptions`` from the parsed command line, over the user's config defaults."""
    fmt = args.format or (None if args.output else defaults.format)
    return CollectOptions(
        output=args.output or Path(f"bundle.{args.format or defaults.format}"),
        fmt=fmt, timeout=args.timeout,
        replay_timeout=args.replay_timeout, module_re=args.module_re, symbol=args.symbol,
        workdir=args.workdir, keep_workdir=args.keep_workdir, always=args.always,
        replay=args.replay, data=args.data, repo=args.repo,
        max_size=args.max_size if args.max_size is not None
        else config.parse_size(defaults.max_size),
    )  # fmt: skip


def collect_command(command: Sequence[str], options: CollectOptions, ui: Ui) -> int:
    """CLI: run the pipeline, then print what was chosen, the verdicts and what next."""
    result = collect(command, options, ui)
    ui.summary(render_summary(result, repo=options.repo, verbose=ui.verbosity > 0))
    return int(result.exit_code)


def render_summary(result: CollectResult, *, repo: str, verbose: bool = False) -> str:
    """The closing lines of ``collect`` for ``result``; ``repo`` gets the new-issue link."""
    if result.selection is None or result.manifest is None:
        return NO_FAILURE
    return summary(
        result.bundle, result.size, result.selection, result.verdicts, result.run, result.fmt,
        repo=repo, manifest=result.manifest, verbose=verbose,
    )  # fmt: skip


def summary(
    path: Path | None,
    size: int,
    selection: Selection,
    verdicts: Sequence[Verdict],
    run: RunRecord,
    fmt: str,
    *,
    repo: str,
    manifest: Manifest,
    verbose: bool = False,
) -> str:
    """The closing lines of ``collect``: what was chosen and why, the verdict, what it
    shares, what next."""
    title = manifest["title"]
    lines = [f"\nxla-bugkit: {run.failure.describe}"]
    for c in selection.chosen:
        lines.append(f"  selected {c.module.label}: {'; '.join(c.reasons)}")
    for v in verdicts:
        lines.append(f"  replay {v.module}: {v.outcome.value} ({v.inputs}): {v.evidence}")
    if not verdicts:
        lines.append("  replay: not run")
    lines.append(f"  bundle: {path} ({_mb(size)})")
    lines += _shared(manifest, verbose)
    if size > config.MAX_SIZE:
        lines.append(f"  note: over GitHub's {config.MAX_SIZE // 10**6} MB attachment limit")
    if fmt == "7z" and path is not None:
        zipped = shlex.quote(str(path.with_suffix(".zip")))
        lines.append(
            "  note: GitHub does not accept .7z attachments; to attach it there run: "
            f"xla-bugkit repack {shlex.quote(str(path))} {zipped}"
        )
    # A link with the whole body runs to kilobytes: the terminal gets the title-only one.
    link = github.new_issue_url(repo, title, github.BODY_PLACEHOLDER)
    shown = shlex.quote(str(path)) if path else "BUNDLE"
    lines.append(f"  next: read ISSUE.md (xla-bugkit show --issue {shown}), open a new issue")
    lines.append(f"    on {repo}, paste ISSUE.md and attach the bundle: {link.url}")
    gh = github.gh_command(repo, title, "-")
    lines.append(f"    or with GitHub's CLI: xla-bugkit show --issue {shown} | {gh}")
    return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _shared(manifest: Manifest, verbose: bool) -> list[str]:
    """What leaves the machine: the files (all of them with -v), redactions and drops."""
    files = manifest["files"]
    total = sum(f["size"] for f in files)
    top = [f["path"] for f in files if "/" not in f["path"]]
    modules = len(files) - len(top)
    lines = [
        f"  shares: {len(files) + 1} files, {_mb(total)} before compression: "
        f"{', '.join([*top, 'manifest.json'])} and {modules} module files"
    ]
    if verbose:
        lines += [f"    {f['size']:>10,}  {f['path']}" for f in files]
    lines += [f"  {note}" for note in manifest["notes"]]
    lines.append(f"  inputs: {manifest['data']}")
    return lines
