"""The work dir's removal: at once where the user waits, the deletion itself detached."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.programs import run_record
from xla_bugkit.collecting import warm, workdir
from xla_bugkit.proc import leftovers

PATIENCE = 300.0  # seconds: a bound on waiting for the detached deletion, never a measure


def _fill(work: Path) -> None:
    (work / workdir.DUMP / "sub").mkdir(parents=True)
    for i in range(50):
        (work / workdir.DUMP / "sub" / f"module_{i:04d}.txt").write_text("x" * 1000)
    (work / workdir.LOG).write_text("log\n")
    (work / workdir.PROCESSES).mkdir()


def _gone(paths: list[Path]) -> None:
    deadline = time.monotonic() + PATIENCE
    while any(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"still there after {PATIENCE:g} s: {paths}"
        time.sleep(0.02)


def test_a_work_dir_made_here_is_gone_at_once_and_deleted_in_the_background(
    tmp_path: Path,
) -> None:
    work = tmp_path / "20261203-000000-abc"
    _fill(work)
    neighbour = tmp_path / "20261202-000000-kept"  # another run's, kept
    _fill(neighbour)
    workdir.remove(work, made_here=True, detach=True)
    assert not work.exists()  # the name is free before the deletion ends
    _gone([tmp_path / f"{workdir.REMOVING}{work.name}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [neighbour.name]
    assert (neighbour / workdir.LOG).read_text() == "log\n"


def test_a_work_dir_the_user_gave_loses_only_what_the_run_put_there(tmp_path: Path) -> None:
    work = tmp_path / "mine"
    _fill(work)
    (work / "notes.txt").write_text("the user's own")
    (work / workdir.RECORD).symlink_to(tmp_path / "elsewhere.json")  # a link goes, not its target
    (tmp_path / "elsewhere.json").write_text("{}")
    workdir.remove(work, made_here=False, detach=True)
    assert not any((work / n).exists() or (work / n).is_symlink() for n in workdir.NAMES)
    _gone(list(work.glob(f"{workdir.REMOVING}*")))
    assert [p.name for p in work.iterdir()] == ["notes.txt"]
    assert (tmp_path / "elsewhere.json").read_text() == "{}"


def test_a_deletion_a_reboot_cut_short_is_finished_by_the_next_one(tmp_path: Path) -> None:
    import os

    stale = tmp_path / f"{workdir.REMOVING}20261101-000000-old"
    _fill(stale)
    os.utime(stale, (time.time() - 3 * 86400,) * 2)
    fresh = tmp_path / f"{workdir.REMOVING}20261203-000000-busy"  # another run's, under way
    _fill(fresh)
    work = tmp_path / "20261203-000001-new"
    _fill(work)
    workdir.remove(work, made_here=True, detach=True)
    _gone([stale, tmp_path / f"{workdir.REMOVING}{work.name}"])
    assert fresh.exists()


def test_without_a_process_to_delete_it_the_work_dir_is_deleted_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    work = tmp_path / "run"
    _fill(work)
    workdir.remove(work, made_here=True, detach=True)
    assert list(tmp_path.iterdir()) == []


def test_the_warm_imports_are_made_and_joined_by_the_end_of_the_block() -> None:
    import threading

    name = "xla_bugkit.replay.compare"
    sys.modules.pop(name, None)
    with warm.importing((name, "xla_bugkit.no_such_module", "json")):
        pass
    assert name in sys.modules and "json" in sys.modules  # a failed import stops no other
    assert not [t for t in threading.enumerate() if t.name == "xla-bugkit-warm"]


def test_what_cannot_be_moved_aside_is_deleted_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "mine"
    _fill(work)
    (work / "notes.txt").write_text("the user's own")
    real = Path.rename

    def rename(self: Path, target: Path) -> Path:
        if self.name == workdir.LOG:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    workdir.remove(work, made_here=False, detach=True)
    assert not any((work / n).exists() for n in workdir.NAMES)
    _gone(list(work.glob(f"{workdir.REMOVING}*")))
    assert [p.name for p in work.iterdir()] == ["notes.txt"]


def _dead_owner_marker() -> str:
    """A marker as a killed collect leaves it: this pid, held by an earlier process."""
    me = leftovers.this_process()
    assert me is not None
    return f"xla-bugkit owner {replace(me, start=me.start - 1).token}\n"


@pytest.mark.skipif(leftovers.this_process() is None, reason="reads /proc (Linux)")
def test_only_a_killed_collects_own_work_dir_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    running = workdir.prepare(None, owned=True)
    assert leftovers.owner_of(running) == leftovers.this_process()
    killed, kept = workdir.default_workdir(owned=True), workdir.default_workdir(owned=True)
    (killed / leftovers.MARKER).write_text(_dead_owner_marker())
    (kept / leftovers.MARKER).write_text(_dead_owner_marker())
    leftovers.release(kept)  # --keep-workdir, or a run kept to be bundled again
    capture = workdir.default_workdir()  # start_capture's: meant to outlive its process
    aside = workdir.runs_folder() / f"{workdir.REMOVING}20261101-000000-x"  # being deleted
    aside.mkdir()
    (aside / leftovers.MARKER).write_text(_dead_owner_marker())
    assert [f.path for f in workdir.killed_runs()] == [killed]
    assert not (capture / leftovers.MARKER).exists()


def test_a_work_dir_the_user_gave_is_never_marked(tmp_path: Path) -> None:
    work = workdir.prepare(tmp_path / "mine", owned=True)
    assert list(work.iterdir()) == []


@pytest.mark.skipif(leftovers.this_process() is None, reason="reads /proc (Linux)")
def test_a_work_dir_kept_for_the_user_is_no_later_collects_to_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xla_bugkit.collecting import CollectOptions, collect
    from xla_bugkit.ui import Ui

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    options = CollectOptions(output=tmp_path / "bundle.zip", keep_workdir=True)
    result = collect(["true"], options, Ui(verbosity=-1))  # no jax: a program that succeeds
    assert result.workdir is not None and (result.workdir / workdir.LOG).exists()
    assert leftovers.owner_of(result.workdir) is None


def test_the_run_record_keeps_which_lines_collect_alone_made(tmp_path: Path) -> None:
    from xla_bugkit.failure import xla_log
    from xla_bugkit.failure.classify import classify

    output = (
        "I1205 08:33:22.760705     539 pjrt_client.cc:579] PjRt-IFRT device count: total=1\n"
        "I1205 08:33:22.760741     539 dump.cc:233] Dumping module_0002.jit_f.txt to /w/dump\n"
        "step 1: loss 0.5\n"
    )
    hide = xla_log.hidden_on_terminal({}, all_info=True)
    assert hide is not None
    (tmp_path / workdir.LOG).write_text(output)
    run = run_record(
        output,
        classify(output, exit_status=0),
        exit_status=0,
        log=tmp_path / workdir.LOG,
        hidden=hide.pattern.decode("latin-1"),
    )
    assert run.program_output == "step 1: loss 0.5\n"
    workdir.save_run(tmp_path, run)
    assert workdir.load_run(tmp_path).program_output == "step 1: loss 0.5\n"
    # A record from before: only the dump lines are known to be collect's.
    assert replace(run, hidden=None).program_output == output.split("\n", 1)[0] + "\n" + (
        "step 1: loss 0.5\n"
    )
