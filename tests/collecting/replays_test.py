"""collect's replay stage on a real dump of several modules."""

from __future__ import annotations

import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit import proc
from xla_bugkit.choose import dumps
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.collecting.replays import Replaying, replay_stage
from xla_bugkit.failure.classify import classify
from xla_bugkit.replay import UNRECORDED, ReplayOptions
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome


def test_the_next_modules_child_imports_jax_while_one_replays(
    program_runs: ProgramRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = program_runs["two_functions"].dump_dir
    modules = [m for m in dumps.index(root).modules if m.name in ("jit_step", "jit_scale")]
    assert len(modules) == 2
    cold: list[object] = []
    ahead: list[object] = []
    run_captured, finish = proc.run_captured, proc.Waiting.finish

    def counted_run(*args: object, **kwargs: object) -> proc.Completed:
        cold.append(args[0])
        return run_captured(*args, **kwargs)  # type: ignore[arg-type]

    def counted_finish(waiting: proc.Waiting, data: bytes, **kwargs: object) -> proc.Completed:
        ahead.append(data)
        return finish(waiting, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(proc, "run_captured", counted_run)
    monkeypatch.setattr(proc.Waiting, "finish", counted_finish)
    replays = replay_stage(
        root, tuple(Chosen(m, ("chosen",), 0) for m in modules), classify("", exit_status=0),
        Replaying(UNRECORDED, ReplayOptions(timeout=600)), ui=Ui(verbosity=-1),
    )  # fmt: skip
    # The first module's child starts with it; the second's was started while it replayed.
    assert (len(cold), len(ahead)) == (1, 1)
    assert [v.module for v in replays.verdicts] == [m.label for m in modules]
    for verdict in replays.verdicts:
        assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
        assert verdict.inputs == "snapshot" and verdict.matches_recorded is True
