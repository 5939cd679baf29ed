"""A replay child kept for the modules after its first (``Spares.serve``), forced on the CPU
by its knob: the same verdicts as a fresh child per module, from one process, and a crash
that ends it judged by its real signal."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit import platforms, proc
from xla_bugkit.choose import dumps
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.collecting.replays import Replaying, replay_stage
from xla_bugkit.failure.classify import Failure, classify
from xla_bugkit.replay import UNRECORDED, ReplayOptions, children, protocol, spawn
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict

pytestmark = pytest.mark.jax

# Real modules of three failing programs: XLA's runtime error (a 4 TiB buffer), a compile
# crash (SIGABRT on a CHECK), and jax#39103's wrong value.
RUNTIME_ERROR = ("runtime_error", "jit_make_buffer")
COMPILE_CRASH = ("compile_crash", "jit_add_noise")
WRONG_RESULT = ("wrong_result", "jit_f")
CHILD_OF = spawn.child_of  # what the judge reads a child's end with, watched below


def one_dump(tmp_path: Path, runs: ProgramRuns, picks: Sequence[tuple[str, str]]) -> Path:
    """One dump folder holding the last module of each (program, name) of ``picks``,
    numbered in that order, as collect's stage finds the modules of one run."""
    root = tmp_path / "dump"
    root.mkdir()
    for number, (program, name) in enumerate(picks, 1):
        source = runs[program].dump_dir
        module = [m for m in dumps.index(source).modules if m.name == name][-1]
        for f in module.files:
            renamed = f.rel.replace(module.label, f"module_{number:04d}.{name}")
            (root / renamed).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / f.rel, root / renamed)
    return root


def staged(
    root: Path, expected: Failure, monkeypatch: pytest.MonkeyPatch, keep: str
) -> tuple[list[Verdict], list[tuple[int, int | None]]]:
    """collect's replay stage on every module of ``root`` with the kept child ``keep``
    ("1") or not ("0"): the verdicts, and each child's (process, status) as the judge got
    them."""
    monkeypatch.setenv(children.KEEP_CHILD, keep)
    seen: list[tuple[int, int | None]] = []

    def watched(done: proc.Completed, out: Path) -> spawn.Child:
        pid = protocol.marker(done.output, protocol.PID)
        assert pid is not None, done.output
        seen.append((int(pid), done.returncode))
        return CHILD_OF(done, out)

    monkeypatch.setattr(spawn, "child_of", watched)
    chosen = tuple(Chosen(m, ("chosen",), 0) for m in dumps.index(root).modules)
    options = ReplayOptions(timeout=600)
    replays = replay_stage(root, chosen, expected, Replaying(UNRECORDED, options), ui=Ui())
    return list(replays.verdicts), seen


def said(verdicts: Sequence[Verdict]) -> list[tuple[str, str, str, str]]:
    """What each verdict says; of a failure, its signature: a crash's message names
    addresses and XLA's own instruction numbers, which differ from one process to the next
    (two fresh children's too)."""
    return [
        (v.module, v.outcome.value, v.failure.signature if v.failure else v.evidence, v.inputs)
        for v in verdicts
    ]


def test_one_kept_child_gives_each_module_the_verdict_of_a_child_of_its_own(
    program_runs: ProgramRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_dump(tmp_path, program_runs, (RUNTIME_ERROR, WRONG_RESULT, RUNTIME_ERROR))
    expected = program_runs["runtime_error"].completed
    failure = classify(expected.output, exit_status=expected.returncode)
    fresh, fresh_children = staged(root, failure, monkeypatch, "0")
    kept, kept_children = staged(root, failure, monkeypatch, "1")
    assert said(kept) == said(fresh)
    assert [v.outcome for v in kept] == [
        Outcome.REPRODUCED_ERROR, Outcome.NOT_REPRODUCED, Outcome.REPRODUCED_ERROR
    ], said(kept)  # fmt: skip
    assert "result differs" in kept[1].evidence, kept[1].evidence
    # Three processes for three modules, and one for all of them, each with its status.
    assert len({pid for pid, _ in fresh_children}) == 3
    assert len({pid for pid, _ in kept_children}) == 1
    assert [status for _, status in kept_children] == [s for _, s in fresh_children]


def test_a_crash_ends_the_kept_child_with_its_signal_and_the_next_module_gets_a_fresh_one(
    program_runs: ProgramRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_dump(tmp_path, program_runs, (RUNTIME_ERROR, COMPILE_CRASH, RUNTIME_ERROR))
    crashed = program_runs["compile_crash"].completed
    failure = classify(crashed.output, exit_status=crashed.returncode)
    fresh, _ = staged(root, failure, monkeypatch, "0")
    kept, kept_children = staged(root, failure, monkeypatch, "1")
    assert said(kept) == said(fresh)
    assert kept[1].outcome is Outcome.REPRODUCED_CRASH, kept[1].evidence
    (first, one), (second, two), (third, three) = kept_children
    assert first == second != third
    assert (one, two, three) == (1, -signal.SIGABRT, 1)


def test_only_a_platform_whose_opening_is_costly_keeps_its_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(children.KEEP_CHILD, raising=False)
    assert [children.keeps(p.name) for p in platforms.PLATFORMS] == [False, True, True]
    assert not children.keeps("a platform without a row")
    monkeypatch.setenv(children.KEEP_CHILD, "0")
    assert not children.keeps("tpu")
    monkeypatch.setenv(children.KEEP_CHILD, "1")
    assert children.keeps("cpu")
