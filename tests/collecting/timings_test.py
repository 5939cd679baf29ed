"""``XLA_BUGKIT_TIMINGS``: one line per stage of a real collect, every stage the docs list."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, TESTS, run_collect
from xla_bugkit.ui import TIMINGS_ENV

pytestmark = pytest.mark.jax


def test_each_stage_of_a_collect_is_timed_the_replay_too(tmp_path: Path) -> None:
    timings = tmp_path / "timings.jsonl"
    program = [sys.executable, str(PROGRAMS / "compile_error.py")]
    done = run_collect(tmp_path / "b.zip", program, "-q", env={TIMINGS_ENV: str(timings)})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in timings.read_text().splitlines()]
    stages = [line["stage"] for line in lines if not line["stage"].startswith("replay ")]
    assert stages[0] == "run" and stages[-1] == "archive", stages
    assert {"index", "select", "replay", "environment", "stage"} <= set(stages), stages
    assert all(line["wall"] >= 0 and line["cpu"] >= 0 for line in lines if "cpu" in line)
    # The replay's phases, from the process that ran it, in order (a compile error: no run).
    phases = [line["stage"] for line in lines if line["stage"].startswith("replay ")]
    assert phases[:2] == ["replay inputs", "replay compile"], phases
    assert len([line for line in lines if "cpu" not in line]) == len(phases)
    # The docs name stages that are there.
    page = (TESTS.parent / "docs" / "reporting.md").read_text("utf-8")
    listed = re.search(r"one JSON line per stage \(([^)]*)\)", " ".join(page.split()))
    assert listed is not None
    named = [s.strip() for s in listed.group(1).split(",") if s.strip() != "..."]
    assert set(named) <= set(stages), (named, stages)
