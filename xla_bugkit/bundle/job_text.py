"""What a merged bundle says about its job: the topology, the part that failed, what the
others did and when they stopped, and where the parts' environments differ (ISSUE.md's job
section, the manifest's ``job.merged``, the lines ``merge`` prints)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xla_bugkit import platforms
from xla_bugkit.bundle.parts import Part
from xla_bugkit.hlo import flags

_HEADLINE = 110  # characters of a part's failure shown in a table cell or a line


def how_it_ended(part: Part) -> str:
    f = part.failure
    kind = str(f.get("kind", "?"))
    if (peer := part.ended_by_job) is not None:
        return f"taken down by the job: {_cut(peer)}"
    if part.taken_down:
        return f"stopped from outside ({_cut(str(f.get('signal') or f.get('stopped_by')))})"
    if kind == "success":
        return "finished without failing"
    if kind == "non-XLA failure" and part.reproduced:
        kind = "wrong result, proven by replay"
    signal = f" ({f['signal']})" if f.get("signal") else ""
    return _cut(f"{kind}{signal}") + f": {_cut(str(f.get('headline', '')))}"


def part_record(
    part: Part, failing: Part, same_as: Mapping[tuple[int, str], str]
) -> dict[str, Any]:
    """One part in the manifest's ``job.merged``."""
    f = part.failure
    first = part.manifest["modules"][0]["label"] if part.manifest["modules"] else None
    process, job = part.process, part.job
    return {
        "part": part.index,
        "bundle": part.bundle.path.name,
        "rank": process.get("rank"),
        "host": job.get("host"),
        "ended": part.ended,
        "kind": f.get("kind"),
        "headline": f.get("headline"),
        "peer": part.ended_by_job,
        "exit_status": part.manifest["exit_status"],
        "first_module": first,
        "same_as": same_as.get((part.index, first)) if first else None,
        "reproduced": part.reproduced,
        "judged_by": part is failing,
        "folder": None if part is failing else f"parts/part-{part.index}",
    }


def topology(parts: Sequence[Part], failing: Part, count: int) -> str:
    """ "4 processes on 2 machines, 2 devices each (8 in all)"."""
    # The job's size, from the parts' job records and names: the process's own count may
    # have been read before the job started.
    devices, processes = failing.process.get("devices"), count
    hosts = {p.job.get("host") for p in parts}
    where = f" on {_counted(len(hosts), 'machine')}" if None not in hosts else ""
    if isinstance(devices, int) and devices >= processes and devices % processes == 0:
        each = _counted(devices // processes, "device")
        return f"{_counted(processes, 'process')}{where}, {each} each ({devices} in all)"
    return f"{_counted(processes, 'process')}{where}"


def _counted(n: int, thing: str) -> str:
    """ "1 process", "2 processes", "3 machines"."""
    return (
        f"{n} {thing}" if n == 1 else f"{n} {thing}es" if thing.endswith("s") else f"{n} {thing}s"
    )


def _when(part: Part, start: _dt.datetime | None) -> str:
    moment = _parse(part.ended)
    if moment is None:
        return part.ended
    if start is None or moment == start:
        return moment.strftime("%H:%M:%S.%f")[:-3] + " UTC"
    return f"+{(moment - start).total_seconds():.1f} s"


def _parse(text: str) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _first_stop(parts: Sequence[Part]) -> _dt.datetime | None:
    moments = [m for p in parts if (m := _parse(p.ended)) is not None]
    return min(moments) if moments else None


def differences(parts: Sequence[Part]) -> list[str]:
    """Where the parts' environments differ: versions, XLA flags (the device count each
    process forced aside, which only says how many devices it had)."""
    lines = []
    names = sorted({k for p in parts for k in p.manifest["versions"]})
    for name in names:
        values = {p.index: p.manifest["versions"].get(name) for p in parts}
        if len(set(values.values())) > 1:
            said = ", ".join(f"part {i}: {v or 'none'}" for i, v in values.items())
            lines.append(f"{name}: {said}")
    flag_sets = {
        p.index: {f for f in p.manifest["xla_flags"] if not f.startswith(flags.HOST_DEVICE_COUNT)}
        for p in parts
    }
    common = set.intersection(*flag_sets.values()) if flag_sets else set()
    extra = {i: sorted(s - common) for i, s in flag_sets.items() if s - common}
    if extra:
        said = "; ".join(
            f"part {i} adds {' '.join(f'`{f}`' for f in fs)}" for i, fs in extra.items()
        )
        rest = [str(p.index) for p in parts if p.index not in extra]
        tail = f" (part{'s' if len(rest) > 1 else ''} {', '.join(rest)}: none)" if rest else ""
        lines.append(f"XLA flags: {said}{tail}")
    return lines


def issue_section(
    parts: Sequence[Part], failing: Part, count: int, same_as: Mapping[tuple[int, str], str]
) -> str:
    """ISSUE.md's "The job" section."""
    start = _first_stop(parts)
    present = {p.index for p in parts}
    missing = [str(i) for i in range(count) if i not in present]
    rows = []
    for p in parts:
        first = p.manifest["modules"][0]["label"] if p.manifest["modules"] else "none"
        same = same_as.get((p.index, first))
        module = f"`{first}`" + (f" (the same module as {same})" if same else "")
        ended = how_it_ended(p).replace("|", "\\|")
        mark = "**" if p is failing else ""
        rows.append(f"| {mark}{p.index}{mark} | {ended} | {_when(p, start)} | {module} |")
    lines = [
        "### The job",
        "",
        f"A `jax.distributed` job of {topology(parts, failing, count)}, each process under "
        f"its own xla-bugkit collect; this bundle merges {len(parts)} of its {count} parts."
        + (f" Missing: {_missing(missing)}." if missing else ""),
        "",
        f"**Part {failing.index} failed {_which(parts, failing, count)}**: the failure and the "
        "module above are its own. The others:",
        "",
        "| part | how it ended | when | first module in its part |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    if failing.manifest["modules"]:
        label = failing.manifest["modules"][0]["label"]
        also = sorted(
            {i for (i, _), same in same_as.items() if same == f"{label} of part {failing.index}"}
        )
        if also:
            named = ", ".join(str(i) for i in also)
            lines += [
                f"Part{'s' if len(also) > 1 else ''} {named} compiled the same module "
                f"(`{label}`: the same HLO before optimizations) too.",
                "",
            ]
    diffs = differences(parts)
    if diffs:
        lines += ["**Where the parts differ:**", "", *[f"- {d}" for d in diffs], ""]
    else:
        lines += ["The parts ran the same versions and XLA flags.", ""]
    process = failing.process
    devices = process.get("devices")
    if isinstance(devices, int) and devices > 1 and failing.manifest["modules"]:
        platform = failing.manifest["modules"][0]["platform"]
        found = platforms.find(platform)
        where = (
            f"on {devices} CPU devices of one process (the replay forces the host's device count)"
            if found is not None and found.host_devices
            else f"on {devices} {platform.upper()} devices"
        )
        lines += [
            f"To replay on one machine: the module was compiled for the whole job's {devices} "
            f"devices; `xla-bugkit verify` runs it {where}. A collective across processes "
            "then runs between devices of one process.",
            "",
        ]
    return "\n".join(lines)


def _missing(missing: Sequence[str]) -> str:
    return (
        f"part{'s' if len(missing) > 1 else ''} {', '.join(missing)} (a part whose program "
        "did not fail writes no bundle, unless collect --always or it holds shards of the "
        "job's inputs; one whose collect was killed writes none)"
    )


def _which(parts: Sequence[Part], failing: Part, count: int) -> str:
    if failing.taken_down:
        return (
            "as the others did: the job took it down (the process that failed first is not "
            "among the parts)"
        )
    alike = [p for p in parts if not p.taken_down and p.weight() == failing.weight()]
    if len(alike) == 1:
        # Unproven, a wrong value the program's own check found is the program's word.
        return "inside XLA" if failing.reproduced or failing.weight() == 5 else "on its own"
    signature = failing.failure.get("signature")
    if all(p.failure.get("signature") == signature for p in alike):
        if len(alike) == count:
            return "first; every part failed this way"
        return f"first of {len(alike)} parts that failed this way"
    return f"first of {len(alike)} parts that failed inside XLA"


def with_section(report: str, section: str) -> str:
    """``report`` (a part's ISSUE.md) with the job section before its command."""
    for anchor in ("**Command**", "**To reproduce**", "<details>"):
        at = report.find(anchor)
        if at >= 0:
            return report[:at] + section + "\n" + report[at:]
    return report.rstrip("\n") + "\n\n" + section


def merged_note(parts: Sequence[Part], failing: Part, count: int) -> str:
    f = failing.failure
    how = "taken down by the job" if failing.taken_down else str(f.get("kind", "?"))
    signal = f" ({f['signal']})" if f.get("signal") and not failing.taken_down else ""
    return (
        f"merged from {len(parts)} of {count} parts of a job; judged by part {failing.index}: "
        f"{how}{signal}"
    )


def summary_lines(
    parts: Sequence[Part],
    failing: Part,
    count: int,
    out: Path,
    size: int,
    *,
    data: str = "",
    modules: Sequence[Mapping[str, Any]] | None = None,
) -> list[str]:
    """merge's summary; ``data``: the merged bundle's inputs, ``modules``: its modules with
    their verdicts, as its manifest says them (default: the failing part's)."""
    start = _first_stop(parts)
    lines = [
        f"xla-bugkit: a job of {topology(parts, failing, count)}: part {failing.index} "
        f"failed {_which(parts, failing, count)}",
    ]
    for p in parts:
        mark = "*" if p is failing else " "
        lines.append(f" {mark} part {p.index} ({_when(p, start)}): {how_it_ended(p)}")
    present = {p.index for p in parts}
    if missing := [str(i) for i in range(count) if i not in present]:
        lines.append(f"  missing: {_missing(missing)}")
    modules = failing.manifest["modules"] if modules is None else modules
    if modules:
        module = modules[0]
        replay = module.get("replay") or {}
        outcome = replay.get("outcome") or "not replayed"
        # Which inputs the verdict was judged on, where merge judged it again.
        on = f"; {replay['judged_on']}" if replay.get("judged_on") else ""
        lines.append(f"  module: {module['label']} ({outcome}{on})")
        if data:
            lines.append(f"  inputs: {data}")
    for d in differences(parts):
        lines.append(f"  differ: {d.replace('`', '')}")
    lines.append(f"  bundle: {out} ({size:,} bytes)")
    return lines


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _HEADLINE else text[: _HEADLINE - 1].rsplit(" ", 1)[0] + "…"
