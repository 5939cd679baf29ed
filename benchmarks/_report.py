"""The machine, the versions, and the Markdown that ``RESULTS.md`` holds."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import Row, Tools


@dataclass(frozen=True)
class Report:
    command: str
    machine: list[tuple[str, str]]
    versions: list[tuple[str, str]]
    inputs: list[str]
    rows: list[Row]
    breakdown: list[Row]
    bounds: list[str]  # why each target not met is not met
    took: float
    smoke: bool
    training: list[Row] = field(default_factory=list)  # collect's stages on the training program


def machine() -> list[tuple[str, str]]:
    return [
        ("CPU", _cpu_model()),
        ("cores", f"{os.cpu_count()} logical, {len(os.sched_getaffinity(0))} usable"),
        ("RAM", _ram()),
        ("OS", platform.platform()),
    ]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def versions(tools: Tools) -> list[tuple[str, str]]:
    found = [("python", platform.python_version())]
    for dist in ("jax", "jaxlib", "py7zr"):
        try:
            found.append((dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            found.append((dist, "not installed"))
    found.append(("rg", _first_line([tools.rg, "--version"], "ripgrep") if tools.rg else "absent"))
    seven = _first_line([tools.sevenzip], "7-Zip") if tools.sevenzip else "absent"
    found.append(("7z", seven))
    return found


def _first_line(cmd: Sequence[str | None], marker: str) -> str:
    try:
        out = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, check=False)
    except OSError as e:
        return f"unavailable ({e})"
    return next((ln.strip() for ln in out.stdout.splitlines() if marker in ln), "unknown")


def render(r: Report) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# xla-bugkit benchmarks\n",
        f"Written by `benchmarks/run.py` on {now} in {r.took / 60:.1f} minutes"
        + (" (**smoke run: tiny inputs, figures mean nothing**)" if r.smoke else "")
        + ". Each row compares xla-bugkit with its baseline measured in the same run, "
        "interleaved (medians where repeated), so the ratios hold on a noisy machine even "
        "where the absolute times move. Benchmarks, not tests: nothing here fails a build.\n",
        "## Reproduce\n",
        f"```sh\n{r.command}\n```\n",
        "## Machine and versions\n",
        _table(["", ""], [[k, v] for k, v in [*r.machine, *r.versions]]),
        "## Inputs\n",
        "".join(f"- {line}\n" for line in r.inputs),
        "## Results\n",
        _table(
            ["Figure", "xla-bugkit", "Baseline", "Ratio", "Target", "Met", "Notes"],
            [
                [x.figure, x.ours, x.baseline, x.ratio, x.target, _met(x.met), x.note]
                for x in r.rows
            ],
        ),
        *_breakdown(
            "Where `collect`'s time goes on the training program (stages timed inside the "
            "CLI through `XLA_BUGKIT_TIMINGS`, medians of the paired runs)",
            r.training,
        ),
        *_breakdown("Where `collect`'s time goes (P1, library pieces timed directly)", r.breakdown),
        "## What bounds the targets not met\n",
        "".join(f"- {b}\n" for b in r.bounds) if r.bounds else "Every target was met.\n",
    ]
    return "\n".join(parts)


def _breakdown(title: str, rows: list[Row]) -> list[str]:
    if not rows:
        return []
    header = ["Stage", "Time", "Share of the by-hand run", "Notes"]
    return [f"## {title}\n", _table(header, [[x.figure, x.ours, x.ratio, x.note] for x in rows])]


def _met(met: bool | None) -> str:
    return {True: "met", False: "**not met**", None: ""}[met]


def _table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"

    return line(header) + line(["---"] * len(header)) + "".join(map(line, rows))
