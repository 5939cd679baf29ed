"""What the replay's parent judges without a child to run: a failure of the replay's own
code, and outputs too large to compare in this process (it runs under no memory limit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import judge, judge_result, protocol
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.verdict import Outcome

CRASH = Failure(Kind.CRASH, Phase.RUN, "killed by SIGSEGV", "killed by SIGSEGV", -11, "SIGSEGV")
INP = ReplayInput("jit_nll", Path("m.hlo.pb"))
RUNNING = f"{protocol.PHASE}run\n"


def test_a_python_error_of_the_replays_own_code_judges_nothing_of_the_module(
    tmp_path: Path,
) -> None:
    output = (
        f"{RUNNING}Traceback (most recent call last):\n"
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 4.29 GiB for an array\n"
    )
    done = proc.Completed(1, output, timed_out=False, duration=1.0)
    verdict = judge.judged(INP, done, tmp_path, CRASH, timeout=60)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert verdict.evidence.startswith("the replay's own code failed while running: ")
    assert "_ArrayMemoryError" in verdict.evidence


def test_outputs_over_the_memory_share_are_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol.save_arrays(protocol.arrays_path(tmp_path, protocol.TEST), [np.ones(4096)])
    protocol.save_arrays(protocol.arrays_path(tmp_path, protocol.OPBYOP), [np.zeros(4096)])
    done = proc.Completed(0, f"{protocol.PHASE}done\n", timed_out=False, duration=1.0)
    # As if this machine had 8 pages of memory: the 32 kB of outputs are over its share.
    monkeypatch.setattr(judge_result.os, "sysconf", lambda name: 4096 if "PAGE_SIZE" in name else 8)
    monkeypatch.setattr(protocol, "load_arrays", lambda path: pytest.fail("loaded"))
    crash = judge.judged(INP, done, tmp_path, CRASH, timeout=60)
    assert crash.outcome is Outcome.NOT_REPRODUCED  # it ran through: no crash here
    assert "are not compared with references here" in crash.evidence
    unsure = judge.judged(INP, done, tmp_path, None, timeout=60)  # a wrong result suspected
    assert unsure.outcome is Outcome.NOT_REPLAYABLE
