"""differential: find the module that computes a wrong value by replaying candidates against
the op-by-op reference, on the real dumps of tests/programs/training_wrong.py (jax#39103
inside a training loop, with 16 modules compiled and run after the wrong one)."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, ProgramRuns, run_collect
from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role, index, is_helper
from xla_bugkit.choose.selection import Chosen, Selection
from xla_bugkit.cli.main import main
from xla_bugkit.collecting import CollectOptions, rebundle_command
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure.classify import Failure, Kind, classify
from xla_bugkit.replay import differential
from xla_bugkit.replay.protocol import KERNEL_ONLY
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import INTERPRET_MODE, Outcome, Verdict

CULPRIT = "jit_feature_energy"
# Far more than the search needs anywhere: the tests stop it by what it finds, not by time.
GENEROUS = 3600.0


def training_run(program_runs: ProgramRuns) -> tuple[Path, DumpIndex, Failure]:
    run = program_runs["training_wrong"]
    failure = classify(run.output, exit_status=run.completed.returncode)
    return run.dump_dir, index(run.dump_dir), failure


def ticking(step: float) -> Callable[[], float]:
    """A clock that moves ``step`` seconds each time it is read: the budget then runs out
    after a set number of checks, however fast the machine is."""
    counter = itertools.count()
    return lambda: step * next(counter)


def test_candidates_are_newest_first_with_helpers_last(program_runs: ProgramRuns) -> None:
    _, idx, _ = training_run(program_runs)
    pool = differential.candidates(idx)
    assert len(pool) >= 30
    assert all(m.newest_snapshot is not None for m in pool)
    helpers = [is_helper(m) for m in pool]
    assert helpers == sorted(helpers), "helpers come after every user module"
    users = [m for m in pool if not is_helper(m)]
    times = [m.newest_snapshot.mtime for m in users if m.newest_snapshot]
    assert times == sorted(times, reverse=True)
    names = [m.name for m in users]
    # Same-name siblings are checked one by one; the wrong module is not the newest.
    assert names.count("jit_train_step") == 2 and names.count("jit__lambda") >= 3
    assert 0 < names.index(CULPRIT) < names.index("jit_train_step")


def test_an_exhausted_budget_checks_nothing_and_says_so(program_runs: ProgramRuns) -> None:
    root, idx, failure = training_run(program_runs)
    stream = io.StringIO()
    diff = differential.search(
        root, idx, failure, pace=differential.Pace(1.0), timeout=300, ui=Ui(stream=stream)
    )
    assert diff.found == () and diff.checked == 0
    assert diff.candidates == len(differential.candidates(idx))
    assert diff.note.startswith(
        f"the search for the module that computes the wrong value stopped after 0 of "
        f"{diff.candidates} modules with real inputs (the 1 s budget (--budget) ran out)"
    )
    assert "falls back to the other evidence" in diff.note
    assert stream.getvalue() == f"xla-bugkit: warning: {diff.note}\n"


def test_the_budget_stops_the_search_after_what_it_allows(program_runs: ProgramRuns) -> None:
    """Each clock reading moves 100 s: the first check (in a child of its own) starts with
    200 s of 300 left and ends at 200; the next would start with nothing left."""
    root, idx, failure = training_run(program_runs)
    stream = io.StringIO()
    pace = differential.Pace(300, batch=1, clock=ticking(100))
    diff = differential.search(root, idx, failure, pace=pace, timeout=600, ui=Ui(stream=stream))
    first = differential.candidates(idx)[0]
    assert diff.checked == 1 and diff.found == ()
    assert diff.verdicts[0].module == first.label
    assert diff.verdicts[0].outcome is Outcome.NOT_REPRODUCED
    assert (
        "stopped after 1 of" in diff.note and "(the 300 s budget (--budget) ran out)" in diff.note
    )
    assert stream.getvalue() == (
        f"xla-bugkit: checking 1/{diff.candidates} {first.label}: matches the reference\n"
        f"xla-bugkit: warning: {diff.note}\n"
    )


@pytest.mark.slow  # a dozen replay children, each importing jax
def test_search_finds_the_module_that_computes_the_wrong_value(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    root, idx, failure = training_run(program_runs)
    assert failure.kind is Kind.WRONG_RESULT
    stream = io.StringIO()
    diff = differential.search(
        root, idx, failure, pace=differential.Pace(GENEROUS), timeout=600,
        ui=Ui(stream=stream), arrays=tmp_path, limit=1,
    )  # fmt: skip
    (found,) = diff.found
    assert found.module.name == CULPRIT
    assert found.score == differential.DIFFERS_SCORE
    assert found.reasons[0].startswith(
        "its output differs from the op-by-op reference: max abs diff "
    )
    assert found.reasons[0].endswith("1 of 16385 elements")
    *matched, wrong = diff.verdicts
    assert wrong.module == found.module.label and wrong.outcome is Outcome.REPRODUCED_WRONG
    assert matched and all(v.outcome is Outcome.NOT_REPRODUCED for v in matched)
    assert diff.note == ""
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith(": matches the reference")
    assert lines[-1].startswith(f"xla-bugkit: checking {len(diff.verdicts)}/{diff.candidates} ")
    # The arrays stay for the bundle, so the verdict can stand for collect's replay.
    assert (tmp_path / found.module.label / "test.npz").exists()


def verdict(label: str, outcome: Outcome, **numbers: object) -> Verdict:
    return Verdict(label, outcome, "evidence", "snapshot", numbers=numbers)


def test_merged_puts_the_found_module_first_with_its_reason(program_runs: ProgramRuns) -> None:
    _, idx, _ = training_run(program_runs)
    by_name = {m.name: m for m in idx.modules}
    culprit, newest, other = by_name[CULPRIT], by_name["jit_norm"], by_name["jit_predict"]
    heuristic = Selection(
        (Chosen(newest, ("newest snapshot",), 50), Chosen(culprit, ("named",), 70)),
        guess=False,
        others=tuple(m.label for m in idx.modules if m not in (newest, culprit)),
    )
    numbers = {"reference": "op-by-op", "max_abs": 0.349, "mismatches": 1, "elements": 16385}
    found = verdict(culprit.label, Outcome.REPRODUCED_WRONG, **numbers)
    reason = differential.reason(found)
    assert reason == (
        "its output differs from the op-by-op reference: max abs diff 0.349, 1 of 16385 elements"
    )
    diff = differential.Differential(
        (Chosen(culprit, (reason,), differential.DIFFERS_SCORE),),
        (verdict(other.label, Outcome.NOT_REPRODUCED), found),
        candidates=36,
    )
    merged = differential.merged(heuristic, diff, limit=3)
    assert [c.module for c in merged.chosen] == [culprit, newest]
    assert merged.chosen[0].reasons == (reason, "named")
    assert not merged.guess
    assert culprit.label not in merged.others and newest.label not in merged.others
    assert differential.merged(heuristic, diff, limit=1).chosen[0].module == culprit
    known = differential.known_verdicts(diff, merged.chosen)
    assert known == {culprit.label: found}


def test_merged_keeps_the_heuristics_when_nothing_differs(program_runs: ProgramRuns) -> None:
    _, idx, _ = training_run(program_runs)
    heuristic = Selection((Chosen(idx.modules[-1], ("newest",), 50),), guess=False)
    empty = differential.Differential((), (), candidates=36, note="stopped")
    assert differential.merged(heuristic, empty, limit=3) is heuristic
    assert differential.known_verdicts(None, heuristic.chosen) == {}


def test_a_guess_gives_way_to_what_the_search_found(program_runs: ProgramRuns) -> None:
    _, idx, _ = training_run(program_runs)
    culprit = next(m for m in idx.modules if m.name == CULPRIT)
    guess = Selection((Chosen(idx.modules[-1], ("a guess",), 10),), guess=True)
    diff = differential.Differential((Chosen(culprit, ("differs",), 90),), (), candidates=1)
    merged = differential.merged(guess, diff, limit=3)
    assert [c.module for c in merged.chosen] == [culprit] and not merged.guess


@pytest.mark.slow  # collect end to end: the training loop, then a dozen replays
def test_collect_chooses_and_proves_the_module_that_computed_the_wrong_value(
    tmp_path: Path,
) -> None:
    out = tmp_path / "training.zip"
    argv = [sys.executable, str(PROGRAMS / "training_wrong.py")]
    c = run_collect(out, argv, "-v", "--budget", f"{GENEROUS:g}")
    assert c.returncode == 0, c.stderr
    m = c.manifest()
    assert m["failure"]["kind"] == "wrong result"
    assert m["failure"]["signature"].startswith("feature energy mismatch: 1 of N rows wrong")
    first = m["modules"][0]
    assert first["label"].endswith(f".{CULPRIT}")
    assert first["reasons"][0].startswith("its output differs from the op-by-op reference")
    assert first["replay"]["outcome"] == "reproduced: wrong result"
    assert "checking 1/" in c.stderr and ": matches the reference" in c.stderr
    # The search's verdict stands for the replay stage: the module is not replayed twice.
    assert f"replaying {first['label']}" not in c.stderr
    assert "expected.npz" in " ".join(c.names())
    assert main(["verify", "-q", str(c.bundle)]) == 0  # the maintainer sees it too


@pytest.mark.parametrize("budget", ["0", "-5", "nan", "inf"])
def test_a_bad_budget_is_refused_before_the_program_runs(
    budget: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    program = f"open({str(ran)!r}, 'w').close()"
    argv = ["collect", f"--budget={budget}", "-o", str(tmp_path / "b.zip")]
    code = main([*argv, "--", sys.executable, "-c", program])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"argument --budget: not a duration: {budget!r} (90, 90s, 2m or 1h)" in err
    assert not ran.exists()


def test_the_bundle_command_keeps_a_budget_given_to_collect(tmp_path: Path) -> None:
    options = CollectOptions(output=tmp_path / "b.zip", budget=600)
    assert "--budget 600" in rebundle_command(tmp_path, options)
    assert "--budget" not in rebundle_command(tmp_path, CollectOptions(output=tmp_path / "b.zip"))


def test_when_no_module_differs_the_note_says_so(program_runs: ProgramRuns) -> None:
    """The two jit_norm modules ran after the wrong one and compute the right norm of what
    they were given: all checked, none differs."""
    root, idx, failure = training_run(program_runs)
    norms = DumpIndex(root, tuple(m for m in idx.modules if m.name == "jit_norm"), ())
    stream = io.StringIO()
    diff = differential.search(root, norms, failure, pace=differential.Pace(GENEROUS),
                               timeout=600, ui=Ui(stream=stream))  # fmt: skip
    assert diff.found == () and diff.checked == diff.candidates == 2
    assert diff.note == (
        "none of the 2 modules with real inputs differs from its op-by-op reference when "
        "replayed on them, so the choice falls back to the other evidence"
    )
    assert stream.getvalue().endswith(f"xla-bugkit: warning: {diff.note}\n")


def test_without_snapshots_there_is_nothing_to_check(program_runs: ProgramRuns) -> None:
    root, idx, failure = training_run(program_runs)
    bare = DumpIndex(
        root,
        tuple(
            DumpModule(m.id, m.name, tuple(f for f in m.files if f.role is not Role.SNAPSHOT))
            for m in idx.modules
        ),
        (),
    )
    diff = differential.search(
        root, bare, failure, pace=differential.Pace(GENEROUS), timeout=600, ui=Ui()
    )
    assert diff.candidates == 0 and diff.verdicts == ()
    assert diff.note.startswith("no module has real inputs (a snapshot) to replay against")


def test_a_kernel_judged_after_the_search_by_its_interpret_mode_is_no_longer_unchecked() -> None:
    """The search's note, as the final verdicts leave it: among modules the op-by-op
    reference checked, a Pallas kernel it could not check was judged later by the kernel's
    outputs under the interpret mode."""
    unchecked = f"ran to completion on the TPU; no reference: {KERNEL_ONLY}"
    kernel = Verdict("module_0002.jit_head", Outcome.NOT_REPLAYABLE, unchecked, "snapshot")
    agreed = [
        Verdict(
            f"module_000{i}.jit_f",
            Outcome.NOT_REPRODUCED,
            "ran to completion",
            "snapshot",
            numbers={"reference": "op-by-op"},
        )
        for i in (0, 1)
    ]
    stopped = "the 60 s budget (--budget) ran out"
    note = differential._fell_back(3, 5, stopped, unchecked=1)
    diff = differential.Differential((), (*agreed, kernel), 5, note, stopped)
    judged = replace(
        kernel, outcome=Outcome.REPRODUCED_WRONG, numbers={"reference": INTERPRET_MODE}
    )
    after = diff.note_after([judged])
    assert "could not be checked" not in after, after
    assert after == (
        f"the search for the module that computes the wrong value stopped after 3 of 5 "
        f"modules with real inputs ({stopped}) (1 of them a Pallas kernel, judged after the "
        "search by its interpret mode); none differed from its reference, so the choice "
        "falls back to the other evidence"
    )
    assert diff.note_after([kernel]) == note  # not judged since: the note stands
    assert differential.Differential((), (), 0).note_after([judged]) == ""
