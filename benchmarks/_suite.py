"""The order of the stages, and the inputs section of the report."""

from __future__ import annotations

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
from _common import Config, Tools, secs, size, timed, tree_bytes
from _dump_bench import measure_archives, measure_rss, measure_search
from _inputs import large_tree, real_dump
from _report import Report, machine, versions


def measure(cfg: Config, command: str) -> Report:
    """Every stage once. P2 comes right after the large tree is written, while it is surely
    in the page cache; the CLI gets a second chance at the end (it may be mid-change)."""
    started = time.perf_counter()
    tools = Tools.find()
    _say("inputs: the real dump")
    real, t_real = timed(lambda: real_dump(cfg))
    if cfg.smoke:  # two copies: enough to exercise the renumbering
        cfg = replace(cfg, large_bytes=2 * tree_bytes(real))
    _say("inputs: the large tree")
    large, t_large = timed(lambda: large_tree(cfg, real))
    _say("P2: index and search")
    rows = measure_search(cfg, tools, large)
    _say("P1: collect")
    p1 = measure_collect(cfg)
    _say("P3: archives and memory")
    rows += measure_archives(cfg, tools, real) + measure_rss(cfg, large, real)
    p1 = retry_cli(cfg, p1)
    _say("P4: verify")
    rows = collect_rows(p1) + rows + measure_verify(cfg, p1)
    inputs = [
        f"real dump: `many_functions.py --count {cfg.count}` run with the dump flags: "
        f"{size(tree_bytes(real))}, {_count(real)} files ({secs(t_real)} to get or reuse)",
        f"large tree: renumbered copies of it: {size(tree_bytes(large))}, {_count(large)} "
        f"files ({secs(t_large)} to get or reuse); in the page cache, like a dump just written",
    ]
    return Report(
        command=command,
        machine=machine(),
        versions=versions(tools),
        inputs=inputs,
        rows=rows,
        breakdown=breakdown_rows(p1),
        bounds=[f"{r.figure}: {r.bound}" for r in rows if r.met is False and r.bound],
        took=time.perf_counter() - started,
        smoke=cfg.smoke,
    )


def _count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def _say(what: str) -> None:
    print(f"[bench] {what}", file=sys.stderr, flush=True)
