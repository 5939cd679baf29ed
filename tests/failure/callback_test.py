"""The program's own host callback, read from the process's Python stack at the stop.

Each excerpt in data/stacks is faulthandler's stack of a real jax 0.10.2 process on the CPU:
the two of a collect stop (its timeout's SIGTERM) of tests/programs/callback_sleep_hang.py
and callback_event_hang.py, the hook's at the os._exit of callback_watchdog_exit.py, one
taken inside a ``jax.debug.callback``, and one of a thread inside XLA's execution of a while
loop, with no callback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.failure.callback import running_in_callback

STACKS = Path(__file__).parent / "data" / "stacks"


@pytest.mark.parametrize(
    ("excerpt", "callback"),
    [
        # pure_callback: the callback itself is in time.sleep (a C function: no frame).
        ("pure_callback_sleeping.txt", "fetch_gain (callback_sleep_hang.py:30)"),
        # io_callback: threading's frames are inside it; the callback is the frame jax called.
        ("io_callback_waiting_on_event.txt", "log_metrics (callback_event_hang.py:31)"),
        # jax.debug.callback goes through debugging.py, not callback.py.
        ("debug_callback.txt", "show (dbg.py:3)"),
        # The hook's stack at the program's own os._exit (its watchdog's thread first).
        ("pure_callback_at_own_exit.txt", "read_sensor (callback_watchdog_exit.py:28)"),
    ],
)
def test_a_thread_inside_the_programs_callback_names_it(excerpt: str, callback: str) -> None:
    assert running_in_callback((STACKS / excerpt).read_text()) == callback


def test_a_thread_inside_xlas_execution_with_no_callback_names_none() -> None:
    assert running_in_callback((STACKS / "xla_executing_no_callback.txt").read_text()) is None


def test_an_empty_stack_names_none() -> None:
    assert running_in_callback("") is None
