"""Bisect one module over jaxlib releases: each probe replays it, in a child, under a release
from the cache (``releases.cache``), and is judged against the recorded failure as ``verify``
judges.

The module goes as the bundle carries it: the before-optimizations proto (never an optimized
module, which other releases abort on), with the recorded flags less those a release does
not know (each said in the probe's detail), on the replay's own tolerance. A TPU module is
bisected over libtpu releases instead, on the chip (``bisect.libtpu``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xla_bugkit import archive, config, jaxlib_adapter, platforms
from xla_bugkit.bisect import libtpu
from xla_bugkit.bisect.search import Bisection, Probe, Seen, bisect, probe_seen
from xla_bugkit.bundle import issue, members
from xla_bugkit.bundle.manifest import (
    Manifest,
    file_entries,
    open_bundle,
    pick_module,
    renamed,
    reseal,
    validate,
    write_manifest,
)
from xla_bugkit.bundle.output import check_output
from xla_bugkit.convert.carrier import with_text
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import Failure
from xla_bugkit.releases import cache, index
from xla_bugkit.replay import ReplayInput, ReplayOptions, RunContext, replay_input, replay_module
from xla_bugkit.ui import Ui
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance


@dataclass(frozen=True)
class Range:
    """Which releases to try: from a folder of wheels or the index, between two versions."""

    wheels: Path | None = None
    low: str | None = None
    high: str | None = None
    # Another interpreter, for the releases built only for it (``--python``).
    python: str | None = None

    def listing(self) -> index.Releases:
        if self.wheels is not None:
            found = index.from_folder(self.wheels, self.python)
        else:
            found = index.from_index(self.python)
        installed = jaxlib_adapter.jaxlib_version()
        chosen = found.with_installed(installed).between(self.low, self.high)
        if not chosen.tried:
            bounds = f"from {self.low or 'the oldest'} to {self.high or 'the newest'}"
            raise BugkitError(f"no jaxlib release {bounds} can be tried here ({found.source})")
        return chosen


def prober(
    inp: ReplayInput,
    expected: Failure | None,
    context: RunContext,
    wheels: Path | None,
    timeout: float,
    ui: Ui,
    elsewhere: Mapping[str, str] | None = None,
) -> Callable[[str], Probe]:
    """The probe of one release: get it (cache, folder or pip), replay ``inp`` under it;
    ``elsewhere``: the releases to try under another interpreter, and which."""

    def probe(version: str) -> Probe:
        started = time.monotonic()
        try:
            with ui.phase(f"getting jaxlib {version}"):
                # The installed release needs no copy: the child's own path has it.
                installed = version == jaxlib_adapter.jaxlib_version()
                python = (elsewhere or {}).get(version)
                release = None if installed else cache.release(version, wheels, python)
        except BugkitError as e:
            ui.say(f"jaxlib {version}: not tried: {e}")
            return Probe(version, Seen.UNTRIED, str(e), time.monotonic() - started)
        with ui.phase(f"replaying under jaxlib {version}"):
            verdict = replay_module(
                replace(inp, release=release),
                expected=expected,
                context=context,
                options=ReplayOptions(timeout=timeout),
            )
        seen = probe_seen(verdict)
        detail = verdict.evidence
        if verdict.withheld:
            detail += f" (not applied: {'; '.join(verdict.withheld)})"
        ui.say(f"jaxlib {version}: {seen.value}: {verdict.evidence}")
        return Probe(version, seen, detail, time.monotonic() - started)

    return probe


def bisect_module(
    inp: ReplayInput,
    expected: Failure | None,
    context: RunContext,
    chosen: Range,
    *,
    reported: str | None,
    timeout: float = config.REPLAY_TIMEOUT,
    ui: Ui | None = None,
) -> Bisection:
    """Bisect ``inp``'s failure (``expected``) over the releases ``chosen`` names."""
    ui = ui or Ui()
    listing = chosen.listing()
    ui.say(
        f"bisecting {inp.name} over jaxlib {listing.tried[0]} to {listing.tried[-1]} "
        f"({len(listing.tried)} releases, from {listing.source})"
    )
    if listing.elsewhere:
        versions, pythons = ", ".join(listing.elsewhere), sorted(set(listing.elsewhere.values()))
        ui.say(f"jaxlib {versions}: built for another Python, tried under {', '.join(pythons)}")
    probe = prober(inp, expected, context, chosen.wheels, timeout, ui, listing.elsewhere)
    return bisect(listing.tried, probe, reported=reported, untried=listing.untried)


def bisect_bundle(
    path: Path,
    chosen: Range,
    *,
    out: Path | None = None,
    fmt: str | None = None,
    force: bool = False,
    timeout: float = config.REPLAY_TIMEOUT,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    module_re: str | None = None,
    ui: Ui | None = None,
    final_name: str | None = None,
) -> Bisection:
    """Bisect the failing module of the bundle ``path``; with ``out``, write the bundle again
    there with the result (the manifest's ``bisect`` record, ISSUE.md's section). Its
    ISSUE.md names the archive ``final_name`` (default: ``out``'s name) where it named
    ``path``."""
    ui = ui or Ui()
    chosen_fmt = None
    if out is not None:
        if out.resolve() == path.resolve():
            raise BugkitError(f"{out} is the bundle itself: choose another output name")
        chosen_fmt = check_output(out, fmt, force=force)
    with (
        open_bundle(path, prefix="xla-bugkit-bisect-", unpacking=ui.phase("unpacking")) as b,
        contextlib.ExitStack() as stack,
    ):
        failure = Failure.from_json(b.manifest["failure"])
        module = pick_module(b.manifest["modules"], module_re)
        inp = replay_input(module["label"], b.module_files(module), module["platform"])
        if inp is None:
            raise BugkitError(f"{module['label']} has no before-optimizations module to replay")
        context = replace(RunContext.of_manifest(b.manifest), tolerance=tolerance)
        versions = b.manifest["versions"]
        timeout = failure.replay_timeout(timeout)
        found = platforms.find(inp.platform)
        if found is not None and found.compiler_dist is not None:
            result = _across_compiler(inp, failure, context, chosen, found, versions, timeout, ui)
        else:
            inp = stack.enter_context(with_text(inp, ui.say))
            reported = versions.get("jaxlib")
            result = bisect_module(
                inp, failure, context, chosen, reported=reported, timeout=timeout, ui=ui
            )
        if out is not None and chosen_fmt is not None:
            manifest = reseal(b) if b.edited else b.manifest
            # ISSUE.md names the archive to attach and verify: now ``out``.
            manifest = renamed(b, manifest, path.name, final_name or out.name)
            write_result(b.root, manifest, result)
            files = {p.relative_to(b.root).as_posix(): p for p in sorted(b.files) if p.is_file()}
            files[members.BISECT] = b.root / members.BISECT
            progress = ui.progress("compressing")
            size = archive.write_archive(files, out, chosen_fmt, progress=progress)
            ui.say(f"wrote {out} ({size:,} bytes, {chosen_fmt})")
    return result


def _across_compiler(
    inp: ReplayInput,
    failure: Failure,
    context: RunContext,
    chosen: Range,
    found: platforms.Platform,
    versions: Mapping[str, str],
    timeout: float,
    ui: Ui,
) -> Bisection:
    """A TPU module's bisect: its compiler ships in libtpu, released apart from jaxlib, so
    the releases searched are libtpu's, on the chip (``bisect.libtpu``)."""
    libtpu.refuse_off_device(inp.name, found)
    if chosen.python is not None:
        raise BugkitError(
            f"--python: {found.compiler_dist} releases are tried under this interpreter's jaxlib"
        )
    return libtpu.bisect_libtpu(
        inp,
        failure,
        context,
        libtpu.LibtpuRange(chosen.wheels, chosen.low, chosen.high),
        reported=versions.get(found.compiler_dist or ""),
        timeout=timeout,
        ui=ui,
    )


ISSUE_HEADING = "#### Across jaxlib releases"
# A TPU bundle's: the axis is libtpu's (``bisect.libtpu``).
ISSUE_HEADINGS = (ISSUE_HEADING, "#### Across libtpu releases")
_DETAIL_MAX = 160  # a table cell: the line a release failed with, cut


def issue_section(result: Bisection) -> str:
    """ISSUE.md's section on a bisect: its answer, then each release tried and what it showed."""
    heading = f"#### Across {result.dist} releases"
    lines = [heading, "", f"**{issue.plain(result.summary)}**", ""]
    rows = [
        [p.version + (" (reported)" if p.version == result.reported else ""), p.seen.value,
         issue.code_span(issue.cut(p.detail, _DETAIL_MAX))]
        for p in result.probes
    ]  # fmt: skip
    lines += [issue.table([result.dist, "replay", "what it showed"], rows), ""]
    if result.untried:
        shown = ", ".join(f"{v} ({why})" for v, why in result.untried[:6])
        more = len(result.untried) - 6
        lines += [
            f"Not tried: {issue.plain(shown)}" + (f" and {more} more" if more > 0 else ""),
            "",
        ]
    lines += ["Replayed by `xla-bugkit bisect`: the before-optimizations module, one child per "
              "release; releases between two that agree were not tried.", ""]  # fmt: skip
    return "\n".join(lines)


def write_result(stage: Path, manifest: Manifest, result: Bisection) -> Manifest:
    """``stage`` (an unpacked bundle) with the bisect's result: ``bisect.json``, the
    manifest's ``bisect`` record and ISSUE.md's section; returns the manifest written."""
    record = result.to_json()
    (stage / members.BISECT).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    report = stage / members.ISSUE
    if report.is_file():
        text = report.read_text("utf-8")
        for heading in ISSUE_HEADINGS:
            text = issue.without_section(text, heading)
        report.write_text(issue.with_section(text, issue_section(result)), "utf-8")
    sealed: dict[str, Any] = {**manifest, "bisect": record}
    sealed["notes"] = [n for n in manifest["notes"] if not n.startswith("across releases:")]
    sealed["notes"].append(f"across releases: {result.summary}")
    sealed["files"] = file_entries(stage)
    final = validate(sealed)
    write_manifest(stage, final)
    return final


def bisect_in_place(bundle: Path, chosen: Range, *, timeout: float, ui: Ui) -> Bisection:
    """Bisect ``bundle`` and put the result in its place (``collect --bisect``); on any
    failure the bundle is left as it was."""
    partial = bundle.with_name(".bisecting." + bundle.name)
    try:
        result = bisect_bundle(
            bundle, chosen, out=partial, force=True, timeout=timeout, ui=ui,
            final_name=bundle.name,
        )  # fmt: skip
        os.replace(partial, bundle)
    finally:
        partial.unlink(missing_ok=True)
    return result
