"""batch: several modules in one replay child, its output cut at the markers."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.programs import ProgramRuns
from xla_bugkit.choose.dumps import index
from xla_bugkit.failure.classify import classify
from xla_bugkit.replay.batch import ENDED, STARTS, _parts, env_flags, replay_batch
from xla_bugkit.replay.inputs import module_files, replay_input
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.replay.protocol import PHASE
from xla_bugkit.verdict import Outcome


def test_parts_end_at_the_first_module_that_did_not_finish() -> None:
    output = (
        f"{STARTS}0\n{PHASE}compile\n{PHASE}done\n{ENDED}0 0\n"
        f"{STARTS}1\nTraceback (most recent call last):\nValueError: boom\n{ENDED}1 1\n"
        f"{STARTS}2\n{PHASE}compile\nF1202 09:49:08.829582  1892 x.cc:46] Check failed: y\n"
    )
    parts = _parts(output)
    assert [status for _, status in parts] == [0, 1]
    assert parts[0][0] == f"{PHASE}compile\n{PHASE}done\n"
    assert parts[1][0].endswith("ValueError: boom\n")
    assert _parts("") == []
    # A part out of order means the output is not what the child wrote: nothing after it.
    assert _parts(f"{STARTS}1\n{ENDED}1 0\n") == []


def test_a_batch_judges_each_module_as_a_child_of_its_own_would(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    """tests/programs/training_wrong.py: its two jit_norm modules and the module that
    computes the wrong value, in one child; the last one also alone, for comparison."""
    run = program_runs["training_wrong"]
    failure = classify(run.output, exit_status=run.completed.returncode)
    idx = index(run.dump_dir)
    names = ("jit_norm", "jit_feature_energy")
    inps = [
        inp
        for m in idx.modules
        if m.name in names
        and (inp := replay_input(m.label, module_files(run.dump_dir, m), m.platform)) is not None
    ]
    assert len(inps) == 3 and len({env_flags(i) for i in inps}) == 1
    keep = [tmp_path / inp.name for inp in inps]
    verdicts = replay_batch(inps, failure, timeout=900, keep_arrays=keep)
    # In id order: the wrong module (module_0038) ran before the two norms.
    assert [v.outcome if v else None for v in verdicts] == [
        Outcome.REPRODUCED_WRONG,
        Outcome.NOT_REPRODUCED,
        Outcome.NOT_REPRODUCED,
    ]
    assert verdicts[0] == replay(inps[0], expected=failure, options=ReplayOptions(timeout=900))
    assert all((k / "test.npz").exists() for k in keep)
