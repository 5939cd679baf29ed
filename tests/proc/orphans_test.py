"""No process of a run outlives it: the installed ``xla-bugkit`` stopped by a signal.

Each run gets a unique environment variable, which every process it starts inherits (the
program, its grandchildren, replay workers, the launcher's guard); a process of the run is
one that carries it. Readiness comes from the processes themselves (pid files a program
writes, a replay worker that has started), never from a sleep; waits are bounded generously.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, clean_env
from xla_bugkit import proc
from xla_bugkit.proc import leftovers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)"),
]

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))
MARK = "XLA_BUGKIT_TEST_RUN"
PATIENCE = 300.0  # seconds: an upper bound on waiting, never a measure of speed

# A program that leaves a grandchild in its process group, as shell scripts do.
SCRIPT = """\
sleep 1000 &
echo $! > {dir}/grandchild.tmp && mv {dir}/grandchild.tmp {dir}/grandchild.pid
echo $$ > {dir}/child.tmp && mv {dir}/child.tmp {dir}/child.pid
wait
"""
# Holds xla-bugkit where a SIGKILL while archiving finds it: the bundle in its partial output,
# not yet renamed to the -o name. Only a pause can hold it there on any machine; the program
# it runs loads this too (PYTHONPATH), and passes through.
PAUSE_BEFORE_RENAME = """\
import os, pathlib, sys, time
_replace = os.replace
def _paused(src, dst, *args, **kwargs):
    if ".partial-" in os.fspath(src) and sys.argv[0].endswith("xla-bugkit"):
        pathlib.Path({ready!r}).touch()
        time.sleep(10000)
    return _replace(src, dst, *args, **kwargs)
os.replace = _paused
"""
# Compiles (and so dumps) a loop that never ends, then stops before running it: replaying
# jit_spin hangs inside XLA until it is stopped.
HANG = """\
import jax
import numpy as np

spin = jax.jit(lambda x: jax.lax.while_loop(lambda c: c == c, lambda c: c + 1, x))
spin.lower(np.int32(0)).compile()
"""


def _state(pid: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return None


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): tells it apart from a reused pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _gone(pids: Mapping[int, str | None]) -> bool:
    """Whether each process has ended: no such pid, a zombie, or the pid taken by another."""
    return all(
        _state(str(pid)) in (None, "Z", "X") or _started(pid) != started
        for pid, started in pids.items()
    )


def processes_of(mark: str) -> list[int]:
    """The live processes (zombies are dead) whose environment holds ``mark``."""
    wanted = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone already, or not ours to read
            continue
        if wanted in environ.split(b"\0") and _state(entry.name) not in (None, "Z"):
            found.append(int(entry.name))
    return found


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def wait_for(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not ready():
        assert time.monotonic() < deadline, f"still waiting for {what} after {PATIENCE:g} s"
        time.sleep(0.05)


def _default_sighup() -> None:
    """SIGHUP as a terminal session gives it: under ``nohup`` the tests inherit it ignored,
    and xla-bugkit rightly keeps an ignored SIGHUP ignored; these tests send one."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@dataclass
class Run:
    """One xla-bugkit process, started with its own mark."""

    popen: subprocess.Popen[str]
    mark: str

    @classmethod
    def start(
        cls, *argv: str, cwd: Path, tmpdir: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Run:
        mark = uuid.uuid4().hex
        env = {**clean_env(), **(env or {}), MARK: mark}
        if tmpdir is not None:
            env["TMPDIR"] = str(tmpdir)
        popen = subprocess.Popen(
            [XLA_BUGKIT, *argv], cwd=cwd, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sighup,
        )  # fmt: skip
        return cls(popen, mark)

    def stop(self, sig: signal.Signals) -> str:
        """Send ``sig``; return stderr once xla-bugkit and every process of the run are gone."""
        self.popen.send_signal(sig)
        _, err = self.popen.communicate(timeout=PATIENCE)
        wait_for(lambda: not processes_of(self.mark), "the run's processes to end")
        return err


def _program_running(tmp_path: Path) -> Run:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(dir=tmp_path))
    out = tmp_path / "bundle.zip"
    run = Run.start(
        "collect", "--workdir", str(tmp_path / "work"), "-o", str(out), "--", "bash",
        str(script), cwd=tmp_path,
    )  # fmt: skip
    pids = [tmp_path / "child.pid", tmp_path / "grandchild.pid"]
    wait_for(lambda: all(p.exists() for p in pids) or run.popen.poll() is not None, "pids")
    assert run.popen.poll() is None, run.popen.communicate()
    assert set(_pids(tmp_path)) <= set(processes_of(run.mark))  # the mark finds them
    return run


def _pids(tmp_path: Path) -> list[int]:
    return [int((tmp_path / f"{n}.pid").read_text()) for n in ("child", "grandchild")]


def _wait_gone(pids: Mapping[int, str | None]) -> None:
    """A killed process is torn down for a moment after its environment is gone: wait it out."""
    wait_for(lambda: _gone(pids), "the program and its grandchild to end")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_collect_stops_the_program_and_its_grandchild(
    tmp_path: Path, sig: signal.Signals
) -> None:
    run = _program_running(tmp_path)
    pids = {pid: _started(pid) for pid in _pids(tmp_path)}
    err = run.stop(sig)
    # xla-bugkit handled the signal and went on to end by itself.
    assert run.popen.returncode >= 0, err
    assert "the program ended: interrupted" in err
    _wait_gone(pids)


def test_no_program_process_outlives_a_sigkilled_collect(tmp_path: Path) -> None:
    run = _program_running(tmp_path)
    pids = {pid: _started(pid) for pid in _pids(tmp_path)}
    run.stop(signal.SIGKILL)
    assert run.popen.returncode == -signal.SIGKILL
    _wait_gone(pids)


@pytest.fixture(scope="module")
def hang_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hang")
    (root / "hang.py").write_text(textwrap.dedent(HANG))
    dump = root / "dump"
    env = clean_env(f"--xla_dump_to={dump} --xla_dump_hlo_as_proto")
    done = proc.run_captured([sys.executable, str(root / "hang.py")], env=env, timeout=PATIENCE)
    assert done.returncode == 0, done.output
    return dump


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _replay_running(hang_dump: Path, tmp_path: Path, *, spinning: bool = False) -> Run:
    """xla-bugkit replaying the hang; with ``spinning``, once its worker is in the loop."""
    argv = ["replay", str(hang_dump), "--module", r"\.jit__lambda$", "--timeout", "3600"]
    (tmp_path / "tmp").mkdir()
    run = Run.start(*argv, cwd=tmp_path, tmpdir=tmp_path / "tmp")
    worker: list[int] = []

    def worker_started() -> bool:
        assert run.popen.poll() is None, run.popen.communicate()
        worker[:] = [
            pid
            for pid in processes_of(run.mark)
            if cmdline(pid)[1:3] == ["-m", "xla_bugkit.replay.child.worker"]
        ]
        return bool(worker)

    wait_for(worker_started, "the replay worker")
    if spinning:
        # The worker gives no sign once it runs the module, and its last words before that
        # (its phase markers) would kill it by EPIPE if it were orphaned earlier. Once XLA
        # has started its threads, what is left before the loop takes well under a CPU
        # second: five more mean it is spinning. CPU time, not wall time: load cannot
        # make this early.
        (pid,) = worker
        wait_for(lambda: len(list(Path(f"/proc/{pid}/task").iterdir())) > 2, "XLA's threads")
        start = _cpu_seconds(pid)
        wait_for(lambda: _cpu_seconds(pid) - start >= 5.0, "the worker to spin")
    return run


def test_sigterm_to_replay_stops_its_worker_first(hang_dump: Path, tmp_path: Path) -> None:
    run = _replay_running(hang_dump, tmp_path)
    err = run.stop(signal.SIGTERM)
    assert run.popen.returncode == 130, err
    assert err.strip().splitlines()[-1] == "xla-bugkit: interrupted"
    assert not list((tmp_path / "tmp").iterdir())  # its temporary folders are gone


def test_no_replay_worker_outlives_a_sigkilled_replay(hang_dump: Path, tmp_path: Path) -> None:
    run = _replay_running(hang_dump, tmp_path, spinning=True)
    run.stop(signal.SIGKILL)
    assert run.popen.returncode == -signal.SIGKILL


def test_the_marks_find_this_process_tree(tmp_path: Path) -> None:
    """The probe itself: a process carrying a mark is found, and not once it has ended."""
    mark = uuid.uuid4().hex
    ready = tmp_path / "ready"
    code = f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(1000)"
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, MARK: mark})
    try:
        wait_for(ready.exists, "the child")
        assert processes_of(mark) == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert processes_of(mark) == []


@pytest.mark.skipif(leftovers.this_process() is None, reason="reads /proc (Linux)")
def test_the_next_collect_removes_what_a_collect_killed_while_archiving_left(
    tmp_path: Path,
) -> None:
    site, cache, tmp, out_dir = (tmp_path / n for n in ("site", "cache", "tmp", "out"))
    for folder in (site, tmp, out_dir):
        folder.mkdir()
    archived = tmp_path / "archived"
    (site / "sitecustomize.py").write_text(PAUSE_BEFORE_RENAME.format(ready=str(archived)))
    out = out_dir / "bundle.zip"
    program = [sys.executable, str(PROGRAMS / "compile_error.py")]
    env = {"XDG_CACHE_HOME": str(cache)}
    killed = Run.start("collect", "-q", "--no-replay", "-o", str(out), "--", *program,
                       cwd=tmp_path, tmpdir=tmp, env={**env, "PYTHONPATH": str(site)})  # fmt: skip
    wait_for(lambda: archived.exists() or killed.popen.poll() is not None, "the archive")
    assert killed.popen.poll() is None, killed.popen.communicate()
    killed.stop(signal.SIGKILL)
    runs = cache / "xla-bugkit" / "runs"
    (partial,) = out_dir.glob(".bundle.zip.partial-*")
    (work,) = runs.iterdir()
    (temp,) = tmp.iterdir()
    assert (work / "dump").is_dir() and any(temp.glob("xla-bugkit-arrays-*"))
    # Named like them, but made by no collect.
    lookalikes = [out_dir / ".bundle.zip.partial-abcd1234", runs / "20200101-000000-mine",
                  tmp / f"{leftovers.TEMP_PREFIX}mine"]  # fmt: skip
    lookalikes[0].write_bytes(b"PK")
    for folder in lookalikes[1:]:
        (folder / "dump").mkdir(parents=True)

    second = Run.start("collect", "-o", str(out), "--", "true", cwd=tmp_path, tmpdir=tmp, env=env)
    _, err = second.popen.communicate(timeout=PATIENCE)
    assert second.popen.returncode == 5, err  # the program did not fail: no bundle
    said = f" left by a killed xla-bugkit (pid {killed.popen.pid})\n"
    assert re.search(r"^xla-bugkit: removed \d+(\.\d)? [kM]B" + re.escape(said), err, re.M), err
    assert not any(p.exists() for p in (partial, work, temp))
    assert all(p.exists() for p in lookalikes)
