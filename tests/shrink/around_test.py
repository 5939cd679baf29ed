"""Which of XLA's pass dumps show the module around a pass: the first run that changed it."""

from __future__ import annotations

from pathlib import Path

from xla_bugkit.shrink.around import pick

HEADER = "HloModule m\n\n"


def _dumps(folder: Path, *files: tuple[str, str]) -> Path:
    folder.mkdir()
    for name, body in files:
        (folder / f"module_0000.m.{name}.txt").write_text(HEADER + body)
    return folder


def test_the_first_run_that_changed_the_module(tmp_path: Path) -> None:
    folder = _dumps(
        tmp_path / "d",
        ("0000.simplification.after_pipeline-start.before_algsimp", "a"),
        ("0001.simplification.after_algsimp.before_dce", "a"),  # a run that changed nothing
        ("0002.simplification.after_dce.before_algsimp", "b = sqrt(x)"),
        ("0003.simplification.after_algsimp.before_dce", "b = abs(x)"),
    )
    (before, b), (after, a) = pick(folder, "algsimp")
    assert (before, after) == ("before_algsimp.txt", "after_algsimp.txt")
    assert b.endswith("b = sqrt(x)") and a.endswith("b = abs(x)")


def test_a_pass_that_never_finished_gives_the_module_before_it(tmp_path: Path) -> None:
    folder = _dumps(
        tmp_path / "d",
        ("0000.simplification.after_pipeline-start.before_algsimp", "first"),
        ("0001.simplification.after_algsimp.before_dce", "first"),
        ("0002.simplification.after_dce.before_algsimp", "crashing"),
    )
    # The run that crashed, not an earlier one that finished.
    assert pick(folder, "algsimp") == (("before_algsimp.txt", HEADER + "crashing"),)
    assert pick(tmp_path / "nothing", "algsimp") == ()
