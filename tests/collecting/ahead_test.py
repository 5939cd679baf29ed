"""collect with its replays made by the program's own process at its main module's end
(``ahead``, forced on the CPU by its switch): the same verdicts, exit code and record as
collect with a child per replay, on a runtime error and a wrong result, with the replay
stage's replays taken from those the program made."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS
from xla_bugkit.collecting import ahead
from xla_bugkit.collecting.driver import collect
from xla_bugkit.collecting.options import CollectOptions, CollectResult
from xla_bugkit.proc import Completed
from xla_bugkit.replay import spawn
from xla_bugkit.ui import Ui

pytestmark = [pytest.mark.jax, pytest.mark.slow]

TAKEN_AHEAD = spawn.taken_ahead  # what the stages ask, watched below


def collected(
    tmp_path: Path, program: str, switch: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[CollectResult, list[Completed]]:
    """collect of ``program`` with the switch at ``switch``; the replays taken from those
    the program made ahead."""
    monkeypatch.setenv(ahead.IN_PROGRAM, switch)
    taken: list[Completed] = []

    def counted(*args: object) -> Completed | None:
        found = TAKEN_AHEAD(*args)  # type: ignore[arg-type]
        if found is not None:
            taken.append(found)
        return found

    monkeypatch.setattr(spawn, "taken_ahead", counted)
    out = tmp_path / f"{switch}.zip"
    # The wrong-value search within a budget that covers it on a loaded machine: the two
    # collects compared must search alike.
    options = CollectOptions(output=out, timeout=600, budget=600)
    result = collect([sys.executable, str(PROGRAMS / program)], options, Ui(verbosity=-1))
    return result, taken


def said(result: CollectResult) -> tuple[object, ...]:
    verdicts = [
        (v.module, v.outcome.value, v.failure.signature if v.failure else v.evidence, v.inputs)
        for v in result.verdicts
    ]
    run = result.run
    assert run is not None
    return (result.exit_code, verdicts, run.exit_status, run.failure.kind, run.failure.headline)


# The replay stage's replays are made ahead where the record at the main module's end shows
# the failure: a compile error's traceback and status 1 do. wrong_result.py ends with
# ``raise SystemExit(message)``: the hook notes the interpreter's own write of the message,
# so the record so far says status 1, and the search's replays are made ahead too.
# runtime_error.py runs out of memory: a replay in the program's process, whose arrays still
# hold its memory, proves nothing of that; nothing is made ahead.
@pytest.mark.parametrize(
    ("program", "made_ahead"),
    [("compile_error.py", True), ("wrong_result.py", True), ("runtime_error.py", False)],
)
def test_collect_with_replays_made_by_the_program_says_what_collect_with_children_says(
    program: str, made_ahead: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children, none_taken = collected(tmp_path, program, "0", monkeypatch)
    held, taken = collected(tmp_path, program, "1", monkeypatch)
    assert none_taken == []
    assert said(held) == said(children)
    assert held.verdicts
    assert bool(taken) == made_ahead, taken
    # Each was made in the program's own process, whose pid its replay said.
    run = held.run
    assert run is not None and run.culprit is not None
    pid = f"XLA_BUGKIT_PID: {run.culprit.process.pid}"
    assert all(pid in done.output for done in taken), taken


@pytest.mark.parametrize(("tpu_here", "platform", "served"), [
    (True, "tpu", True), (True, "cpu", False), (False, "tpu", False), (None, "tpu", False),
])  # fmt: skip
def test_unset_it_is_on_where_the_machine_has_a_chip_costly_to_open(
    monkeypatch: pytest.MonkeyPatch, tpu_here: bool | None, platform: str, served: bool
) -> None:
    from xla_bugkit import platforms

    monkeypatch.delenv(ahead.IN_PROGRAM, raising=False)
    monkeypatch.setattr(
        platforms, "devices_here", lambda p, *_: tpu_here if p.name == "tpu" else None
    )
    assert ahead.asked() is bool(tpu_here)
    assert ahead.serves(platform) is served
    monkeypatch.setenv(ahead.IN_PROGRAM, "0")  # said off: off on a TPU machine too
    assert not ahead.asked() and not ahead.serves("tpu")


def test_the_replay_without_the_runs_own_flags_is_made_by_the_program_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program's own fast-math flags (its XLA_FLAGS, the whole process's) make the wrong
    value: the replay without them, each set back to its default outright, is made by the
    program as well, and says what a child says: without them the result agrees."""
    program = "nan_fast_math_assert.py"
    children, _ = collected(tmp_path, program, "0", monkeypatch)
    held, taken = collected(tmp_path, program, "1", monkeypatch)
    assert said(held) == said(children)
    assert held.run is not None and children.run is not None
    assert held.run.own_flags == children.run.own_flags
    assert held.run.relaxed_by == children.run.relaxed_by != ()
    # The module as it ran, without the run's two own flags, and with each of them alone.
    assert len(taken) == 4, taken
    pid = f"XLA_BUGKIT_PID: {held.run.culprit.process.pid}" if held.run.culprit else "?"
    assert all(pid in done.output for done in taken), taken
