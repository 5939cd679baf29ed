"""collect's side of a program held at its main module's end (``held``), against a reader
of the requests that stands for the program's hook: a program that does not serve is not
asked, one that ends without answering ends the asking."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from xla_bugkit.run.held import NOT_HERE, Held

ENDED = "TEST_ENDED: "


def test_a_program_that_does_not_serve_is_not_asked(tmp_path: Path) -> None:
    held = Held(tmp_path, ENDED)
    try:
        assert not held.open(os.getpid())  # nobody reads the requests
        reply = held.ask(b"{}")
        assert (reply.answer, reply.output) == (None, "")
    finally:
        held.close()
    assert not any(tmp_path.iterdir())


def serving(held: Held, answer: bytes) -> threading.Thread:
    """A stand-in for the hook: reads one request, writes ``answer`` and goes."""
    requests = os.open(held.requests, os.O_RDONLY | os.O_NONBLOCK)

    def serve() -> None:
        answers = os.open(held.answers, os.O_WRONLY)
        try:
            os.set_blocking(requests, True)
            os.read(requests, 1 << 16)
            os.write(answers, answer)
        finally:
            os.close(answers)
            os.close(requests)

    return threading.Thread(target=serve)


def test_an_answer_up_to_its_line_and_an_end_without_one(tmp_path: Path) -> None:
    held = Held(tmp_path, ENDED)
    try:
        thread = serving(held, b"compiling\nTEST_ENDED: 0 1\n")
        assert held.open(os.getpid())
        thread.start()
        reply = held.ask(b'{"out": "x"}', timeout=600)
        thread.join()
        assert (reply.output, reply.answer, reply.timed_out) == ("compiling\n", "0 1", False)
        assert not held.ended_it
    finally:
        held.close()
    held = Held(tmp_path, ENDED)  # the next run's
    try:
        thread = serving(held, b"XLA_BUGKIT_PHASE: compile\n")  # then it ends: a crash
        assert held.open(os.getpid())
        thread.start()
        reply = held.ask(b"{}", timeout=600)
        thread.join()
        assert (reply.output, reply.answer) == ("XLA_BUGKIT_PHASE: compile\n", None)
        assert held.ended_it and not held.alive
    finally:
        held.close()


def test_a_program_that_cannot_load_the_server_says_why_and_is_not_ended(
    tmp_path: Path,
) -> None:
    held = Held(tmp_path, ENDED)
    try:
        thread = serving(held, f"{NOT_HERE}ImportError: no numpy\n".encode())
        assert held.open(os.getpid())
        thread.start()
        reply = held.ask(b"{}", timeout=600)
        thread.join()
        assert reply.answer is None and "ImportError: no numpy" in reply.output
        assert not held.ended_it
    finally:
        held.close()


def test_the_hook_spells_the_words_as_collect_does() -> None:
    from xla_bugkit.replay.child import in_program
    from xla_bugkit.run import held
    from xla_bugkit.run.hook import ending

    assert (ending._SERVE_HERE, ending._SERVE_PATH, ending._NOT_HERE) == (
        held.SERVE_HERE, held.SERVE_PATH, held.NOT_HERE
    )  # fmt: skip
    assert in_program.__name__ == ending._SERVER
