"""The order of the stages, and the inputs section of the report."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from _collect_bench import (
    breakdown_rows,
    collect_rows,
    measure_collect,
    measure_verify,
    retry_cli,
)
from _common import Config, Row, Tools, secs, size, timed, tree_bytes
from _dump_bench import measure_archives, measure_rss, measure_search
from _inputs import large_tree, real_dump
from _report import Report, machine, versions
from _training_bench import measure_training, training_rows


def measure(cfg: Config, command: str) -> Report:
    """Every stage once (or those in ``cfg.only``). P2 comes right after the large tree is
    written, while it is surely in the page cache; the CLI gets a second chance at the end (it
    may be mid-change)."""
    started, load_start = time.perf_counter(), _load()
    tools = Tools.find()
    rows: list[Row] = []
    inputs: list[str] = []
    breakdown: list[Row] = []
    training: list[Row] = []
    if cfg.wants("training"):
        _say("P1: collect of the training program")
        rows, training = training_rows(measure_training(cfg))
        inputs.append(
            "training program: `training_program.py` (smoke: `--steps 3 --width 16`) run with "
            "collect's environment (dump flags, `JAX_LOG_COMPILES=1`, compile cache off)"
        )
    if cfg.wants("p1", "p2", "p3", "p4"):
        more, inputs_more, breakdown = _synthetic(cfg, tools)
        rows += more
        inputs += inputs_more
    return Report(
        command=command,
        machine=[
            *machine(),
            (
                "load average, 1/5/15 min",
                f"{load_start} at the start, {_load()} at the end (other work shares the cores)",
            ),
        ],
        versions=versions(tools),
        inputs=inputs,
        rows=rows,
        breakdown=breakdown,
        bounds=[f"{r.figure}: {r.bound}" for r in rows if r.met is False and r.bound],
        took=time.perf_counter() - started,
        smoke=cfg.smoke,
        training=training,
    )


def _synthetic(cfg: Config, tools: Tools) -> tuple[list[Row], list[str], list[Row]]:
    """P1-P4 on ``many_functions.py``'s dump and the large tree made of it."""
    _say("inputs: the real dump")
    real, t_real = timed(lambda: real_dump(cfg))
    if cfg.smoke:  # two copies: enough to exercise the renumbering
        cfg = replace(cfg, large_bytes=2 * tree_bytes(real))
    rows: list[Row] = []
    large, t_large = real, 0.0
    if cfg.wants("p2", "p3"):
        _say("inputs: the large tree")
        large, t_large = timed(lambda: large_tree(cfg, real))
    if cfg.wants("p2"):
        _say("P2: index and search")
        rows += measure_search(cfg, tools, large)
    p1 = None
    if cfg.wants("p1", "p4"):
        _say("P1: collect")
        p1 = measure_collect(cfg)
    if cfg.wants("p3"):
        _say("P3: archives and memory")
        rows += measure_archives(cfg, tools, real) + measure_rss(cfg, large, real)
    breakdown: list[Row] = []
    if p1 is not None:
        p1 = retry_cli(cfg, p1)
        _say("P4: verify")
        rows = collect_rows(p1) + rows + (measure_verify(cfg, p1) if cfg.wants("p4") else [])
        breakdown = breakdown_rows(p1)
    inputs = [
        f"real dump: `many_functions.py --count {cfg.count}` run with the dump flags: "
        f"{size(tree_bytes(real))}, {_count(real)} files ({secs(t_real)} to get or reuse)",
    ]
    if large != real:
        inputs.append(
            f"large tree: renumbered copies of it: {size(tree_bytes(large))}, {_count(large)} "
            f"files ({secs(t_large)} to get or reuse); in the page cache, like a dump just "
            "written"
        )
    return rows, inputs, breakdown


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def _say(what: str) -> None:
    print(f"[bench] {what}", file=sys.stderr, flush=True)
