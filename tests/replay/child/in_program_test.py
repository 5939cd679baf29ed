"""collect's replays served by the program's own process, held at its main module's end
(``in_program``, forced on the CPU): the same verdicts as children of their own, nothing
new in the run's dump folder or output, and a served replay that crashes the program
replayed again in a fresh child."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import xla_bugkit
from tests.helpers.programs import PROGRAMS, ProgramRuns
from tests.replay.children_test import (
    COMPILE_CRASH,
    RUNTIME_ERROR,
    WRONG_RESULT,
    one_dump,
    said,
    staged,
)
from xla_bugkit.choose import dumps
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.collecting.replays import Replaying, replay_stage
from xla_bugkit.failure.classify import Failure, classify
from xla_bugkit.replay import UNRECORDED, ReplayOptions, Spares, protocol
from xla_bugkit.replay.children import Serves
from xla_bugkit.run.at_main_end import AtMainEnd
from xla_bugkit.run.held import BOUND, Held
from xla_bugkit.run.record import RunRecord
from xla_bugkit.run.rerun import Ending, rerun
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Verdict

pytestmark = pytest.mark.jax

PACKAGE_PARENT = Path(xla_bugkit.__file__).resolve().parents[1]


@dataclass
class Served:
    """What the program's process did at its main module's end."""

    verdicts: list[Verdict] = field(default_factory=list)
    in_program: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    dump_before: set[Path] = field(default_factory=set)
    dump_after: set[Path] = field(default_factory=set)


def held_run(
    tmp_path: Path,
    program: str,
    root: Path,
    expected: Failure,
    serves: Serves = lambda env, spec: True,
    bound: float = BOUND,
) -> tuple[RunRecord, Served]:
    """``program`` rerun under the hook, its process asked at its main module's end for the
    replay stage on every module of ``root`` that it ``serves``; none asked (an empty
    ``root``): collect leaves it be, waiting ``bound`` seconds for a request."""
    work = tmp_path / "held"
    work.mkdir()
    held = Held(work, protocol.ENDED, bound=bound)
    served = Served()
    dump_dir = work / "dump"

    def at_end(pid: int, so_far: Callable[[], RunRecord], deadline: float | None) -> bool:
        served.dump_before = set(dump_dir.rglob("*"))
        if not any(root.iterdir()):
            return False
        assert held.open(pid)
        served.pids.append(pid)
        chosen = tuple(Chosen(m, ("chosen",), 0) for m in dumps.index(root).modules)
        replaying = Replaying(UNRECORDED, ReplayOptions(timeout=600))
        with Spares() as spares:
            spares.hold(held, serves)
            replays = replay_stage(root, chosen, expected, replaying, ui=Ui(), spares=spares)
            served.verdicts = list(replays.verdicts)
            served.in_program = list(spares.in_program)
            served.dump_after = set(dump_dir.rglob("*"))
        return held.ended_it

    base = {**os.environ, **held.env(PACKAGE_PARENT)}
    try:
        run = rerun(
            [sys.executable, str(PROGRAMS / program)],
            dump_dir=dump_dir,
            log_path=work / "run.log",
            ending=Ending(600),
            echo=False,
            base_env=base,
            at_main_end=AtMainEnd(while_held=at_end),
        )
    finally:
        held.close()
    return run, served


def plain_run(tmp_path: Path, program: str) -> RunRecord:
    work = tmp_path / "plain"
    work.mkdir()
    return rerun(
        [sys.executable, str(PROGRAMS / program)],
        dump_dir=work / "dump",
        log_path=work / "run.log",
        ending=Ending(600),
        echo=False,
    )


def test_the_programs_process_serves_its_replays_with_the_verdicts_of_children(
    program_runs: ProgramRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_dump(tmp_path, program_runs, (RUNTIME_ERROR, WRONG_RESULT, RUNTIME_ERROR))
    expected = program_runs["runtime_error"].completed
    failure = classify(expected.output, exit_status=expected.returncode)
    fresh, _ = staged(root, failure, monkeypatch, "0")
    run, served = held_run(tmp_path, "runtime_error.py", root, failure)
    assert said(served.verdicts) == said(fresh)
    # All three in the program's process, which is the run's own.
    assert len(served.in_program) == 3, served.in_program
    assert run.culprit is not None and served.pids == [run.culprit.process.pid]
    # Its compiles wrote nothing into the run's dump folder, and nothing of theirs reached
    # the run's output; the run's record is the one it has without them.
    assert served.dump_before and served.dump_after == served.dump_before
    assert protocol.MARKER not in run.output
    plain = plain_run(tmp_path, "runtime_error.py")
    assert (run.exit_status, run.failure.kind) == (plain.exit_status, plain.failure.kind)
    assert run.failure.signature == plain.failure.signature


def test_a_served_replay_that_crashes_the_program_is_replayed_in_a_fresh_child(
    program_runs: ProgramRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_dump(tmp_path, program_runs, (RUNTIME_ERROR, COMPILE_CRASH, RUNTIME_ERROR))
    crashed = program_runs["compile_crash"].completed
    failure = classify(crashed.output, exit_status=crashed.returncode)
    fresh, _ = staged(root, failure, monkeypatch, "0")
    run, served = held_run(tmp_path, "runtime_error.py", root, failure)
    assert said(served.verdicts) == said(fresh)
    # The first served; the crash ended the program, so it and the third ran in children.
    assert len(served.in_program) == 1, served.in_program
    # The run's record is the program's as its main module ended, not the crash's.
    plain = plain_run(tmp_path, "runtime_error.py")
    assert (run.exit_status, run.failure.kind) == (plain.exit_status, plain.failure.kind)
    assert run.failure.signature == plain.failure.signature
    assert any("ended while it served a replay" in n for n in run.xla_flags.notes)


def test_a_replay_the_program_may_not_serve_lets_it_go_and_runs_in_a_child(
    program_runs: ProgramRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_dump(tmp_path, program_runs, (RUNTIME_ERROR, WRONG_RESULT, RUNTIME_ERROR))
    expected = program_runs["runtime_error"].completed
    failure = classify(expected.output, exit_status=expected.returncode)
    fresh, _ = staged(root, failure, monkeypatch, "0")

    def only_the_first(env: Mapping[str, str], spec: Mapping[str, object]) -> bool:
        return "module_0001" in str(spec["hlo"])  # the others: as if without the run's flags

    run, served = held_run(tmp_path, "runtime_error.py", root, failure, only_the_first)
    assert said(served.verdicts) == said(fresh)
    assert len(served.in_program) == 1, served.in_program
    plain = plain_run(tmp_path, "runtime_error.py")
    assert (run.exit_status, run.failure.signature) == (plain.exit_status, plain.failure.signature)


def test_a_program_collect_does_not_ask_goes_on_to_its_own_exit_after_the_bound(
    tmp_path: Path,
) -> None:
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    failure = classify("", exit_status=0)
    run, served = held_run(tmp_path, "runtime_error.py", nothing, failure, bound=1)
    assert served.pids == []
    plain = plain_run(tmp_path, "runtime_error.py")
    assert (run.exit_status, run.failure.kind) == (plain.exit_status, plain.failure.kind)
    assert run.failure.signature == plain.failure.signature
    assert protocol.MARKER not in run.output
