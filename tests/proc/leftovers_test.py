"""Who owns a folder or a partial output, and what a killed owner's next collect removes.

Real processes killed with SIGKILL, and markers written as a killed process leaves them; no
jax. Readiness comes from the child itself (a line it prints), never from a sleep.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from xla_bugkit.proc import leftovers
from xla_bugkit.proc.leftovers import MARKER, Owner

pytestmark = pytest.mark.skipif(leftovers.this_process() is None, reason="reads /proc (Linux)")

PATIENCE = 300.0  # seconds: an upper bound on waiting, never a measure of speed
# Marks a folder as its own, says so, and waits to be killed.
OWN_AND_WAIT = """\
import sys, time
from pathlib import Path
from xla_bugkit.proc import leftovers
leftovers.mark(Path(sys.argv[1]))
print(leftovers.this_process().pid, flush=True)
time.sleep(10000)
"""


def me() -> Owner:
    owner = leftovers.this_process()
    assert owner is not None
    return owner


def recycled() -> Owner:
    """This process's pid as a process that started before it: one that has ended."""
    return dataclasses.replace(me(), start=me().start - 1)


def marked(folder: Path, owner: Owner) -> Path:
    """``folder``, filled and marked as the killed ``owner`` left it."""
    (folder / "dump" / "sub").mkdir(parents=True)
    # 1.6 kB with the marker (45 to 54 bytes, as long as the pid and start time).
    (folder / "dump" / "sub" / "module.txt").write_text("x" * 1520)
    (folder / MARKER).write_text(f"xla-bugkit owner {owner.token}\n")
    return folder


def test_a_process_killed_with_sigkill_leaves_a_folder_the_next_collect_removes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "xla-bugkit-run-abc"
    folder.mkdir()
    (folder / "arrays.npz").write_bytes(b"\0" * 2020)  # 2.1 kB with the marker
    child = subprocess.Popen([sys.executable, "-c", OWN_AND_WAIT, str(folder)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())  # the marker is written
        # Running: its folder is left alone, as a second collect's running side by side.
        assert leftovers.killed_folders(tmp_path, "xla-bugkit-run-*") == []
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=PATIENCE)
    found = leftovers.killed_folders(tmp_path, "xla-bugkit-run-*")
    assert [(f.path, f.owner.pid) for f in found] == [(folder, pid)]
    said = leftovers.remove(found)
    assert said == f"removed 2.1 kB left by a killed xla-bugkit (pid {pid})"
    assert list(tmp_path.iterdir()) == []


def test_only_a_marked_folder_whose_owner_has_ended_is_removed(tmp_path: Path) -> None:
    killed = marked(tmp_path / "xla-bugkit-run-killed", recycled())
    running = marked(tmp_path / "xla-bugkit-run-running", me())
    unmarked = tmp_path / "xla-bugkit-run-unmarked"  # looks the same, but is not ours
    unmarked.mkdir()
    garbled = tmp_path / "xla-bugkit-run-garbled"
    garbled.mkdir()
    (garbled / MARKER).write_text("something else 1-2-3\n")
    other = marked(tmp_path / "other-name", recycled())  # ours, but not named as asked
    link = tmp_path / "xla-bugkit-run-link"
    link.symlink_to(killed, target_is_directory=True)  # removing it would follow it
    found = leftovers.killed_folders(tmp_path, "xla-bugkit-run-*")
    assert [f.path for f in found] == [killed]
    assert leftovers.remove(found) == (
        f"removed 1.6 kB left by a killed xla-bugkit (pid {me().pid})"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (running, unmarked, garbled, other, link)
    )


def test_an_owner_is_judged_only_where_its_pid_means_it() -> None:
    assert not me().gone()
    assert recycled().gone()  # the pid runs, but another process holds it
    # Another machine sharing the folder (NFS), or another container: its pid means
    # nothing here, even a pid that runs nothing.
    elsewhere = dataclasses.replace(me(), pid=2**22 + 1, place="00000000")
    assert not elsewhere.gone()
    # This machine, restarted since: nothing of that boot runs.
    assert dataclasses.replace(me(), boot="00000000").gone()


def test_owners_read_back_from_what_they_wrote() -> None:
    assert Owner.parse(me().token) == me()
    for bad in ("", "12-34", "a-1-00000000-00000000", f"{me().token}-extra"):
        assert Owner.parse(bad) is None


def test_a_folder_kept_for_the_user_is_released(tmp_path: Path) -> None:
    kept = marked(tmp_path / "xla-bugkit-run-kept", recycled())
    leftovers.release(kept)
    assert leftovers.killed_folders(tmp_path, "xla-bugkit-run-*") == []
    assert (kept / "dump" / "sub" / "module.txt").exists()


def test_several_killed_owners_are_said_in_one_line(tmp_path: Path) -> None:
    first = marked(tmp_path / "xla-bugkit-run-1", recycled())
    other = dataclasses.replace(recycled(), pid=me().pid + 1)
    (tmp_path / "xla-bugkit-run-2").mkdir()
    (tmp_path / "xla-bugkit-run-2" / "big").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "xla-bugkit-run-2" / MARKER).write_text(f"xla-bugkit owner {other.token}\n")
    found = leftovers.killed_folders(tmp_path, "xla-bugkit-run-*")
    assert len(found) == 2 and first.exists()
    pids = sorted({me().pid, me().pid + 1})
    assert leftovers.remove(found) == (
        f"removed 3 MB left by 2 killed xla-bugkit runs (pids {pids[0]}, {pids[1]})"
    )
    assert leftovers.remove([]) is None


def test_the_temp_folder_holds_the_blocks_temp_files_and_goes_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = marked(tmp_path / f"{leftovers.TEMP_PREFIX}killed", recycled())
    with leftovers.temp_folder() as folder:
        assert folder.parent == tmp_path and leftovers.owner_of(folder) == me()
        made = Path(tempfile.mkdtemp(prefix="xla-bugkit-arrays-"))
        assert made.parent == folder
        # From inside, the killed runs' folders are looked for where this one was made.
        assert [f.path for f in leftovers.killed_temp_folders()] == [killed]
    assert tempfile.tempdir == str(tmp_path)
    assert not folder.exists()


def test_write_whole_leaves_no_partial_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "module.hlo"
    target.write_bytes(b"old")
    leftovers.write_whole(target, b"new")
    assert target.read_bytes() == b"new" and sorted(tmp_path.iterdir()) == [target]
    folder = tmp_path / "a folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):
        leftovers.write_whole(folder, b"x")  # written beside it, then cannot take its place

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(leftovers.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        leftovers.write_whole(target, b"newer")
    assert target.read_bytes() == b"new"
    assert sorted(tmp_path.iterdir()) == [folder, target]
