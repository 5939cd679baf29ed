"""A child kept for several requests (``proc.serving``), on a real child process: each
answer cut at its line, a crash's real signal, a timeout that stops the group, and no child
left when it is stopped."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from xla_bugkit.errors import ProcessError
from xla_bugkit.proc.serving import Serving, start_serving

# Answers each line of stdin: "echo WORDS" prints them (and a line to stderr) and answers
# with its pid; "abort" dies of SIGABRT; "hang" never answers; "interrupt FILE" starts a
# grandchild (its pid in FILE), sends its parent SIGTERM and hangs.
SERVER = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    for line in iter(sys.stdin.readline, ""):
        request = line.split()
        if request[0] == "abort":
            print("about to abort", flush=True)
            os.abort()
        if request[0] == "interrupt":  # a grandchild, then SIGTERM to the parent, as a kill does
            sleeper = subprocess.Popen(["sleep", "100"])
            with open(request[1], "w") as f:
                f.write(f"{sleeper.pid}\\n")
            os.kill(os.getppid(), signal.SIGTERM)
            request = ["hang"]
        if request[0] == "hang":
            print("hanging", flush=True)
            while True:
                time.sleep(60)
        print(*request[1:], flush=True)
        print("said on stderr", file=sys.stderr, flush=True)
        print("DONE:", os.getpid(), flush=True)
    """
)


@pytest.fixture
def server(tmp_path: Path) -> Serving:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return start_serving([sys.executable, str(script)], answer="DONE:")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_one_child_answers_each_request_with_its_own_output(server: Serving) -> None:
    try:
        first = server.ask(b"echo one", timeout=600)
        second = server.ask(b"echo two three", timeout=600)
    finally:
        server.stop()
    assert (first.answer, second.answer) == (str(server.pid), str(server.pid))
    assert first.output == "one\nsaid on stderr\n"
    assert second.output == "two three\nsaid on stderr\n"
    assert (second.returncode, second.timed_out) == (None, False)
    assert not alive(server.pid)


def test_a_crash_is_the_childs_end_with_its_real_signal(server: Serving) -> None:
    assert server.ask(b"echo before", timeout=600).answer == str(server.pid)
    crashed = server.ask(b"abort", timeout=600)
    assert crashed.answer is None and not crashed.timed_out
    assert crashed.returncode == -signal.SIGABRT
    assert crashed.output == "about to abort\n"
    assert not server.alive and not alive(server.pid)
    with pytest.raises(ProcessError, match="already ended"):
        server.ask(b"echo after")


def test_a_request_past_its_timeout_stops_the_child(server: Serving) -> None:
    assert server.ask(b"echo ready", timeout=600).answer is not None
    # The child never answers: whatever the machine's speed, the timeout is what ends it.
    hung = server.ask(b"hang", timeout=0.5)
    assert hung.timed_out and hung.answer is None
    assert hung.returncode == -signal.SIGTERM
    assert not server.alive and not alive(server.pid)


def test_stopping_a_child_that_was_never_asked_leaves_nothing(server: Serving) -> None:
    server.stop()
    server.stop()  # a second stop does nothing
    assert not alive(server.pid)


def test_an_interrupt_stops_the_childs_whole_group_and_is_raised(
    server: Serving, tmp_path: Path
) -> None:
    grandchild = tmp_path / "grandchild.pid"
    with pytest.raises(KeyboardInterrupt):
        server.ask(f"interrupt {grandchild}".encode(), timeout=600)
    assert not server.alive and not alive(server.pid)
    assert not alive(int(grandchild.read_text()))
