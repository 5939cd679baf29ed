"""A run that left no XLA dumps: the hint to fix XLA_FLAGS only where the processes' records
point at flags; otherwise interrupted (130) or not XLA's failure (3). The real runs are in
tests/cli/exit_codes_test.py; here each record is one a run could leave."""

from __future__ import annotations

import pytest

from tests.helpers.programs import run_record
from xla_bugkit.collecting.no_dumps import without_dumps
from xla_bugkit.errors import ExitCode, RerunNeeded
from xla_bugkit.failure.kinds import Kind
from xla_bugkit.failure.record import Failure, Phase
from xla_bugkit.run.evidence import ProcessEvidence

COMPILE_ERROR = Failure(Kind.COMPILE_ERROR, Phase.COMPILE, "INTERNAL: boom", "INTERNAL: boom")
PYTHON_ERROR = Failure(Kind.EXIT, Phase.UNKNOWN, "ValueError: no", "ValueError: no")
STOPPED = Failure(Kind.INTERRUPTED, Phase.UNKNOWN, "stopped by the user", "")


def process(platform: str = "", xla_flags: str = "") -> ProcessEvidence:
    env = {"XLA_FLAGS": xla_flags} if xla_flags else {}
    return ProcessEvidence(pid=10, ppid=1, argv=("x.py",), events=(), platform=platform, env=env)


def test_xla_started_without_collects_dump_flag_is_the_flags_hint() -> None:
    theirs = process("cpu", "--xla_cpu_enable_fast_math=false")
    said = "it replaced XLA_FLAGS (its XLA started with XLA_FLAGS='--xla_cpu_enable_fast_math"
    for failure in (COMPILE_ERROR, PYTHON_ERROR):
        with pytest.raises(RerunNeeded) as e:
            without_dumps(run_record("", failure), [theirs], "zip")
        assert said in str(e.value) and str(e.value).endswith("then run collect again")
    # A stop is the user's: interrupted, the flags said all the same.
    stopped = without_dumps(run_record("", STOPPED), [theirs], "zip")
    assert stopped.exit_code == ExitCode.INTERRUPTED and said in stopped.notes[0]


def test_an_xla_failure_with_no_record_and_no_dumps_is_the_flags_hint() -> None:
    with pytest.raises(RerunNeeded, match="XLA failed but dumped nothing: the program may"):
        without_dumps(run_record("", COMPILE_ERROR), [], "zip")


@pytest.mark.parametrize(
    ("saved", "said"),
    [
        ([], "with no sign of XLA (no process of it loaded jax, TensorFlow or PyTorch/XLA)"),
        ([process()], "before it started XLA (1 Python process, none started it)"),
        (
            [process("cpu", "--xla_dump_to=/w/dump")],
            "before XLA compiled anything (its XLA started, with collect's dump flags)",
        ),
    ],
)
def test_a_failure_before_xla_compiled_is_not_reproduced_and_a_stop_is_interrupted(
    saved: list[ProcessEvidence], said: str
) -> None:
    failed = without_dumps(run_record("", PYTHON_ERROR), saved, "zip")
    assert failed.exit_code == ExitCode.NOT_REPRODUCED and failed.bundle is None
    (note,) = failed.notes
    assert note == (
        f"the program wrote no XLA dumps (non-XLA failure: ValueError: no): it failed {said}, "
        "so the failure is not XLA's and there is nothing to bundle"
    )
    assert "XLA_FLAGS" not in note
    stopped = without_dumps(run_record("", STOPPED), saved, "zip")
    assert stopped.exit_code == ExitCode.INTERRUPTED and "XLA_FLAGS" not in stopped.notes[0]
    assert stopped.notes[0].endswith(f": stopped {said}")
