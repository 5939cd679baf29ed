"""proc: real child processes, their output, their process groups, limits and signals."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xla_bugkit import proc
from xla_bugkit.errors import ProcessError
from xla_bugkit.proc import starting


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_output_is_captured_from_stdout_and_stderr() -> None:
    done = proc.run(
        python("import sys; print('to out', flush=True); print('to err', file=sys.stderr)")
    )
    assert done.returncode == 0
    assert "to out\n" in done.output and "to err\n" in done.output
    assert not done.timed_out and not done.interrupted
    assert done.duration > 0


def test_run_captured_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    done = proc.run_captured(python("print('hidden')"))
    assert done.output == "hidden\n"
    out, err = capfd.readouterr()
    assert "hidden" not in out and "hidden" not in err


def test_echo_streams_to_our_stdout_and_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    code = "import sys; print('live out', flush=True); print('live err', file=sys.stderr)"
    done = proc.run(python(code), echo=proc.Echo())
    out, err = capfd.readouterr()
    assert out == "live out\n"
    assert err == "live err\n"
    assert "live out" in done.output and "live err" in done.output


def test_hidden_lines_stay_in_the_output_but_leave_the_terminal(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Lines shaped like the glog INFO lines XLA prints once its log level is lowered; the
    # second arrives in two writes, split inside its prefix.
    script = (
        "import sys, time\n"
        "w = sys.stderr.write\n"
        "w('I1202 23:03:16.202233  5727 dump.cc:233] Dumping module_0001.jit_f.txt to d\\n')\n"
        "w('step 1\\nIter'); sys.stderr.flush(); time.sleep(0.2)\n"
        "w('ation 2\\nI12'); sys.stderr.flush(); time.sleep(0.2)\n"
        "w('02 23:03:16.3  5727 dump.cc:233] Dumping module_0002.jit_g.txt to d\\n')\n"
        "w('I1202 is a name, not a log line')\n"
    )
    hide = re.compile(rb"I\d{4} [\d:.]+\s+\d+ [\w./-]+:\d+\] ")
    done = proc.run([sys.executable, "-c", script], echo=proc.Echo(hide))
    err = capfd.readouterr().err
    assert err == "step 1\nIteration 2\nI1202 is a name, not a log line"
    assert done.output.count("Dumping module_") == 2


def test_log_gets_the_output_as_it_arrives(tmp_path: Path) -> None:
    log_path = tmp_path / "run.log"
    marker = tmp_path / "marker"
    # The child waits until the first line is in the log: proof it was written live.
    code = (
        "import pathlib, sys, time\n"
        "print('first', flush=True)\n"
        f"log = pathlib.Path({str(log_path)!r}); deadline = time.time() + 20\n"
        "while b'first' not in log.read_bytes() and time.time() < deadline: time.sleep(0.02)\n"
        f"pathlib.Path({str(marker)!r}).write_text(str(b'first' in log.read_bytes()))\n"
        "print('second')\n"
    )
    with log_path.open("wb") as log:
        done = proc.run(python(code), log=log, timeout=60)
    assert done.returncode == 0
    assert marker.read_text() == "True"
    assert log_path.read_text() == "first\nsecond\n" == done.output


def test_the_two_streams_are_merged_a_whole_line_at_a_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log_path = tmp_path / "run.log"
    arrived = tmp_path / "arrived"
    # Half a stderr line, then a whole stdout line, then the rest of the stderr line: the
    # child waits for each step to reach us, so the pipes' reads interleave for certain.
    code = (
        "import pathlib, sys, time\n"
        f"log, arrived = pathlib.Path({str(log_path)!r}), pathlib.Path({str(arrived)!r})\n"
        "deadline = time.time() + 30\n"
        "def wait(done):\n"
        "    while not done() and time.time() < deadline: time.sleep(0.02)\n"
        "sys.stderr.write('Dumping module_0010.jit_'); sys.stderr.flush()\n"
        "wait(arrived.exists)\n"
        "print('step 1', flush=True)\n"
        "wait(lambda: b'step 1' in log.read_bytes())\n"
        "sys.stderr.write('convert_element_type\\nno newline at the end')\n"
    )

    def note() -> None:
        arrived.touch()  # half a line counts as output (a hang's stall clock)

    with log_path.open("wb") as log:
        done = proc.run(
            python(code), log=log, timeout=60, watch=proc.Watch(on_output=note), echo=proc.Echo()
        )
    assert done.returncode == 0
    out, err = capfd.readouterr()  # the terminal gets each stream as it comes
    assert (out, err) == (
        "step 1\n",
        "Dumping module_0010.jit_convert_element_type\nno newline at the end",
    )
    expected = "step 1\nDumping module_0010.jit_convert_element_type\nno newline at the end"
    assert log_path.read_text() == expected == done.output


def test_log_to_a_file_like_object() -> None:
    sink = io.BytesIO()
    done = proc.run(["bash", "-c", "echo one; echo two >&2"], log=sink)
    assert sorted(sink.getvalue().decode().splitlines()) == ["one", "two"]
    assert sorted(done.output.splitlines()) == ["one", "two"]


def test_binary_garbage_is_decoded_with_replacement() -> None:
    done = proc.run(python("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')"))
    assert done.output == "ok \ufffd\ufffd end"


def test_env_and_cwd_reach_the_child(tmp_path: Path) -> None:
    code = "import os; print(os.environ['BUGKIT_PROBE'], os.getcwd())"
    done = proc.run(python(code), env={**os.environ, "BUGKIT_PROBE": "yes"}, cwd=tmp_path)
    assert done.output.split() == ["yes", str(tmp_path)]


def test_exit_status_is_kept() -> None:
    assert proc.run(python("raise SystemExit(7)")).returncode == 7


def test_timeout_kills_the_whole_group_including_a_grandchild(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 100 & echo $! > {pid_file}; echo started; sleep 100"
    started = time.monotonic()
    done = proc.run(["bash", "-c", script], timeout=1)
    assert time.monotonic() - started < proc.GRACE_SECONDS + 10
    assert done.timed_out and not done.interrupted
    assert done.returncode == -signal.SIGTERM
    assert "started" in done.output
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_child_that_ignores_sigterm_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "GRACE_SECONDS", 0.5)  # the wait before SIGKILL
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(100)\n"
    )
    done = proc.run(python(code), timeout=1)
    assert done.timed_out
    assert done.returncode == -signal.SIGKILL
    assert 1.5 <= done.duration < 10


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT])
def test_death_by_signal_is_a_negative_returncode(sig: signal.Signals) -> None:
    done = proc.run(python(f"import os; os.kill(os.getpid(), {int(sig)})"))
    assert done.returncode == -sig
    assert not done.timed_out


def test_a_real_segfault() -> None:
    done = proc.run(python("import ctypes; ctypes.string_at(0)"))
    assert done.returncode == -signal.SIGSEGV


def test_file_size_limit_kills_a_child_writing_a_big_file(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    argv = ["dd", "if=/dev/zero", f"of={big}", "bs=1000000", "count=4"]
    done = proc.run(argv, limits=proc.Limits(file_size_bytes=1_000_000))
    assert done.returncode == -signal.SIGXFSZ
    assert big.stat().st_size == 1_000_000


def test_file_size_limit_in_a_python_child_is_an_error(tmp_path: Path) -> None:
    # CPython ignores SIGXFSZ, so its write fails with EFBIG instead of killing it.
    big = tmp_path / "big.bin"
    code = f"open({str(big)!r}, 'wb').write(b'x' * 4_000_000)"
    done = proc.run(python(code), limits=proc.Limits(file_size_bytes=1_000_000))
    assert done.returncode == 1
    assert "OSError: [Errno 27] File too large" in done.output
    assert big.stat().st_size <= 1_000_000


def test_limits_do_not_apply_to_us(tmp_path: Path) -> None:
    import resource

    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    proc.run(python("pass"), limits=proc.Limits(file_size_bytes=1000))
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before


def test_memory_limit_makes_a_big_allocation_fail() -> None:
    code = "b = bytearray(2_000_000_000)"
    done = proc.run(python(code), limits=proc.Limits(memory_bytes=500_000_000))
    assert done.returncode == 1
    assert "MemoryError" in done.output


def test_command_not_found_is_a_process_error(tmp_path: Path) -> None:
    with pytest.raises(ProcessError) as raised:
        proc.run(["no-such-command-for-bugkit"])
    assert str(raised.value) == "cannot run 'no-such-command-for-bugkit': command not found"
    assert raised.value.exit_code == 1


def test_a_file_that_is_not_executable_is_a_process_error(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(ProcessError, match="permission denied"):
        proc.run([str(script)])


def test_sigterm_as_interrupt_raises_keyboard_interrupt() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), proc.sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode; never reached
    assert signal.getsignal(signal.SIGTERM) == previous


def test_sigterm_during_a_run_stops_the_child_as_interrupted(tmp_path: Path) -> None:
    # The child's own subshell sends us (its parent) SIGTERM while proc.run waits on it.
    pid_file = tmp_path / "child.pid"
    script = f"echo $$ > {pid_file}; (sleep 0.5; kill -TERM $PPID) & sleep 100"
    with proc.sigterm_as_interrupt():
        done = proc.run(["bash", "-c", script], timeout=30)
    assert done.interrupted and not done.timed_out
    # The child got SIGINT, as from Ctrl-C.
    assert done.returncode == -signal.SIGINT
    assert done.duration < 10
    assert not alive(int(pid_file.read_text()))


def written(path: Path) -> bool:
    """Whether ``path`` holds a whole line (the shell's ``echo`` has finished writing it)."""
    return path.exists() and path.read_text().endswith("\n")


def test_an_interrupt_before_the_wait_begins_stops_the_child_as_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C lands after the exec, before the readers start: on a loaded machine (or with
    # another thread holding the GIL) that moment can last long enough to be hit.
    pid_file = tmp_path / "child.pid"
    checked = starting.check_exec

    def check_then_interrupt(*args: object) -> None:
        checked(*args)  # type: ignore[arg-type]
        deadline = time.monotonic() + 120
        while not written(pid_file):  # the command runs: its pid is there to check
            assert time.monotonic() < deadline
            time.sleep(0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(starting, "check_exec", check_then_interrupt)
    # No command runs between writing the pid and `exec`: a bash that gets SIGINT while it
    # waits on a command that exits 0 (an `mv`) goes on, and is killed after the grace period.
    done = proc.run(["bash", "-c", f"echo $$ > {pid_file}; exec sleep 100"], timeout=120)
    assert done.interrupted and not done.timed_out
    assert done.returncode == -signal.SIGINT
    assert not alive(int(pid_file.read_text()))


def test_combined_output_keeps_the_childs_order() -> None:
    code = "for i in range(200): print('progress', i)\nraise SystemExit('the real message')\n"
    for _ in range(20):  # the race is lost ~40% of runs here; 20 runs make it certain
        done = proc.run([sys.executable, "-u", "-c", code])
        assert done.output.splitlines()[-1] == "the real message"


def wait_until_dead(pids: list[int], bound: float = 120.0) -> None:
    """Poll until every pid is gone; ``bound`` is generous, never a measure of speed."""
    deadline = time.monotonic() + bound
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if alive(pid)]
        time.sleep(0.05)


def test_what_a_child_leaves_in_its_group_is_stopped_when_the_run_ends(tmp_path: Path) -> None:
    # The grandchild ignores SIGTERM, and the script's own `kill 0` signals the whole group
    # (the guard included) before the script ends: the guard must survive that and then
    # kill the grandchild once the run is over.
    pid_file = tmp_path / "grandchild.pid"
    script = f"(trap '' TERM; exec sleep 1000) & echo $! > {pid_file}; kill -TERM 0"
    done = proc.run(["bash", "-c", script], timeout=120)
    assert done.returncode == -signal.SIGTERM and not done.timed_out
    wait_until_dead([int(pid_file.read_text())])


def test_no_child_or_grandchild_outlives_a_sigkilled_parent(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 1000 & echo $$ $! > {pids}.tmp; mv {pids}.tmp {pids}; wait"
    parent_code = f"from xla_bugkit import proc; proc.run(['bash', '-c', {script!r}])"
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 120
        while not pids.exists():
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        child, grandchild = (int(p) for p in pids.read_text().split())
        assert alive(child) and alive(grandchild)
    finally:
        parent.kill()
        parent.wait()
    wait_until_dead([child, grandchild])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_interrupt_a_run_by_themselves(
    tmp_path: Path, sig: signal.Signals
) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"echo $$ > {pid_file}; (sleep 0.5; kill -{sig.name[3:]} $PPID) & sleep 100"
    # As a terminal session gives it: under nohup SIGHUP comes ignored, and stays so.
    inherited = signal.signal(sig, signal.SIG_DFL)
    try:
        done = proc.run(["bash", "-c", script], timeout=120)
        assert signal.getsignal(sig) == signal.SIG_DFL  # as it was before the run
    finally:
        signal.signal(sig, inherited)
    assert done.interrupted and not done.timed_out
    assert done.returncode == -signal.SIGINT
    assert not alive(int(pid_file.read_text()))


def test_an_ignored_sighup_stays_ignored() -> None:
    # As under nohup: the run goes on.
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        done = proc.run(["bash", "-c", "kill -HUP $PPID; echo still here"], timeout=120)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert not done.interrupted
    assert done.returncode == 0 and done.output == "still here\n"


def test_an_interrupted_captured_run_raises_once_the_child_is_gone(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"echo $$ > {pid_file}; (sleep 0.5; kill -TERM $PPID) & sleep 100"
    with pytest.raises(KeyboardInterrupt):
        proc.run_captured(["bash", "-c", script], timeout=120)
    assert not alive(int(pid_file.read_text()))


def test_the_command_is_our_own_child() -> None:
    # The launcher execs the command: the process we wait on is the command itself.
    done = proc.run(python("import os; print(os.getppid())"))
    assert int(done.output) == os.getpid()


def test_a_missing_working_directory_is_a_process_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with pytest.raises(ProcessError) as raised:
        proc.run(["true"], cwd=gone)
    assert str(raised.value) == f"cannot run 'true' in {gone}: No such file or directory"


def test_a_waiting_child_gets_its_stdin_when_finished(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script = f'touch {ready}; read line; echo "got $line"; exit 3'
    waiting = proc.start_waiting(["bash", "-c", script])
    _wait_for(ready)  # it runs ahead, before it has its input
    done = waiting.finish(b"the spec\n", timeout=120)
    assert (done.returncode, done.output) == (3, "got the spec\n")
    with pytest.raises(ProcessError):
        waiting.finish(b"again")


def test_a_waiting_child_stopped_unused_is_gone_with_its_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 1000 & echo $$ $! > {pids}.tmp; mv {pids}.tmp {pids}; read line"
    waiting = proc.start_waiting(["bash", "-c", script])
    _wait_for(pids)
    waiting.stop()
    waiting.stop()  # twice is harmless
    wait_until_dead([int(p) for p in pids.read_text().split()])
    with pytest.raises(ProcessError):
        waiting.finish(b"too late")


def test_a_waiting_child_that_ended_early_is_judged_by_its_own_status(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    # It closes its stdin first: the write meets a broken pipe, which is no error of ours.
    waiting = proc.start_waiting(["bash", "-c", f"exec 0<&-; touch {gone}; echo bye; exit 7"])
    _wait_for(gone)
    done = waiting.finish(b"x" * (1 << 20), timeout=120)
    assert (done.returncode, done.output) == (7, "bye\n")


def test_an_interrupt_while_a_waiting_child_runs_stops_it_and_is_raised(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"echo $$ > {pid_file}; read line; (sleep 0.5; kill -TERM $PPID) & sleep 100"
    waiting = proc.start_waiting(["bash", "-c", script])
    with pytest.raises(KeyboardInterrupt):
        waiting.finish(b"go\n", timeout=120)
    assert not alive(int(pid_file.read_text()))


def _wait_for(path: Path, bound: float = 120.0) -> None:
    """Until ``path`` exists; ``bound`` is generous, never a measure of speed."""
    deadline = time.monotonic() + bound
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_child_whose_output_asks_is_killed_after_its_grace() -> None:
    """The child says its job ended it, prints its error in its grace, then would wait for
    ever (a SIGTERM it ignores too): its group is killed, and nothing it printed is lost."""
    code = (
        "import signal, sys, threading\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('step 1', flush=True)\n"
        "print('the job ended me', flush=True)\n"
        "print('my error', file=sys.stderr, flush=True)\n"
        "threading.Event().wait()\n"
    )
    read: list[bytes] = []

    def end_when(lines: bytes) -> float | None:
        read.append(lines)
        return 0.5 if b"the job ended me" in lines else None

    done = proc.run(python(code), timeout=600, watch=proc.Watch(end_when=end_when))
    assert done.ended_early and not done.timed_out and not done.interrupted
    assert done.returncode == -signal.SIGKILL
    assert "my error" in done.output and b"".join(read).count(b"step 1") == 1


def test_a_child_that_ends_in_its_grace_ends_as_it_would() -> None:
    code = "import sys; print('the job ended me', flush=True); sys.exit(3)"
    done = proc.run(python(code), timeout=600, watch=proc.Watch(end_when=lambda _: 600.0))
    assert done.returncode == 3 and not done.ended_early


def test_a_reader_that_fails_leaves_the_child_to_run_its_course() -> None:
    def end_when(lines: bytes) -> float | None:
        raise ValueError("a bug of the reader's")

    code = "print('one', flush=True); print('two', flush=True)"
    done = proc.run(python(code), timeout=600, watch=proc.Watch(end_when=end_when))
    assert done.returncode == 0 and not done.ended_early
    assert done.output.split() == ["one", "two"]
