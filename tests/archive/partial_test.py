"""The partial output of a writer killed mid-archive: named after its owner, removed by the
next collect writing to the same folder, and nothing else there is touched.

A real writer process stops itself inside ``write_archive`` (its own progress callback, once
the first bytes are in) and is killed with SIGKILL there; no jax.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from xla_bugkit.archive import write_archive
from xla_bugkit.proc import leftovers

pytestmark = pytest.mark.skipif(leftovers.this_process() is None, reason="reads /proc (Linux)")

PATIENCE = 300.0  # seconds: an upper bound on waiting, never a measure of speed
# Writes an archive; says so once the first bytes are in, then waits there to be killed.
WRITE_AND_WAIT = """\
import os, sys, time
from pathlib import Path
from xla_bugkit.archive import write_archive

def progress(done, total):
    if done:
        print(os.getpid(), flush=True)
        time.sleep(10000)

write_archive({"a.txt": Path(sys.argv[1])}, Path(sys.argv[2]), progress=progress)
"""


def _killed_mid_archive(src: Path, out: Path) -> int:
    child = subprocess.Popen([sys.executable, "-c", WRITE_AND_WAIT, str(src), str(out)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, child.communicate(timeout=PATIENCE)
        return int(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=PATIENCE)


def test_a_killed_writers_partial_output_is_removed_and_nothing_else(tmp_path: Path) -> None:
    src = tmp_path / "a.txt"
    src.write_text("hello\n" * 100)
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "bundle.zip"
    write_archive({"a.txt": src}, out)  # an earlier bundle, which the killed one was to replace
    pid = _killed_mid_archive(src, out)
    (partial,) = folder.glob(".bundle.zip.partial-*")
    assert partial.name.startswith(f".bundle.zip.partial-{pid}-")
    me = leftovers.this_process()
    assert me is not None
    keep = [
        out,
        folder / ".bundle.zip.partial-abcd1234",  # named as before owners: not provably ours
        folder / f"{leftovers.partial_prefix(out)}abcd1234",  # a writer still running
        folder / f".report.zip.partial-{dataclasses.replace(me, place='00000000').token}-x",
        folder / "notes.partial-1-2-00000000-00000000-abcd1234",
    ]
    for path in keep[1:]:
        path.write_bytes(b"PK")
    found = leftovers.killed_partials(folder)
    assert [(f.path, f.owner.pid) for f in found] == [(partial, pid)]
    assert leftovers.remove(found) is not None
    assert sorted(folder.iterdir()) == sorted(keep)


def test_a_killed_writer_of_another_output_in_the_folder_is_removed_too(tmp_path: Path) -> None:
    me = leftovers.this_process()
    assert me is not None
    recycled = dataclasses.replace(me, start=me.start - 1)  # this pid, an earlier process
    other = tmp_path / f".report.7z.partial-{recycled.token}-k3j2h1g0"
    other.write_bytes(b"7z")
    assert leftovers.remove(leftovers.killed_partials(tmp_path)) == (
        f"removed 2 bytes left by a killed xla-bugkit (pid {me.pid})"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_output_name_too_long_for_the_owner_is_written_all_the_same(tmp_path: Path) -> None:
    src = tmp_path / "a.txt"
    src.write_text("hello\n")
    out = tmp_path / ("b" * 220 + ".zip")
    assert leftovers.partial_prefix(out) == f".{out.name}.partial-"
    write_archive({"a.txt": src}, out)
    assert sorted(tmp_path.iterdir()) == sorted([src, out])
