"""The program's own host callback, read from the process's Python stack at the stop.

Each excerpt in data/stacks is faulthandler's stack of a real jax 0.10.2 process on the CPU:
the two of a collect stop (its timeout's SIGTERM) of tests/programs/callback_sleep_hang.py
and callback_event_hang.py, the hook's at the os._exit of callback_watchdog_exit.py, one
taken inside a ``jax.debug.callback``, and one of a thread inside XLA's execution of a while
loop, with no callback. The excerpts of a fatal signal: faulthandler's at the ``os.abort()``
of tests/programs/callback_abort.py's callback, and of benchmarks/heldout5/tile_worker.py's
(a worker process); and, for the wordings of Python 3.12 and 3.13, whose jax is not
installed here, the same interpreters' own output of a callback called through a stand-in
``jax/_src/callback.py`` that aborts in a helper (3.12) or segfaults there through ctypes
(3.13). data/callback_errors holds the output of benchmarks/heldout5/gradnorm_monitor.py,
whose ``jax.debug.callback`` raised in a helper it called.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.failure.callback import (
    CallbackCrash,
    crashed_in_callback,
    crashed_outside_jax,
    raised_in_callback,
    running_in_callback,
)

STACKS = Path(__file__).parent / "data" / "stacks"
ERRORS = Path(__file__).parent / "data" / "callback_errors"


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


HELPER_DIED = CallbackCrash("check_header (decoder.py:17)", "_parse_magic (decoder.py:12)")


@pytest.mark.parametrize(
    ("excerpt", "crash"),
    [
        # Python 3.11, jax 0.10.2: the callback itself called os.abort().
        ("pure_callback_abort.txt", CallbackCrash("_check_header (callback_abort.py:25)", None)),
        (
            "pure_callback_abort_in_worker.txt",
            CallbackCrash("_decoder_check_header (tile_worker.py:32)", None),
        ),
        # A helper the callback called died; the standard library's frame above it is not
        # the program's (ctypes.string_at).
        ("helper_abort_py312.txt", HELPER_DIED),
        ("helper_segfault_py313.txt", HELPER_DIED),
    ],
)
def test_a_fatal_signal_in_the_programs_callback_names_it(
    excerpt: str, crash: CallbackCrash
) -> None:
    assert crashed_in_callback((STACKS / excerpt).read_text()) == crash


def test_a_helpers_death_is_said_beside_the_callback() -> None:
    crash = crashed_in_callback((STACKS / "helper_segfault_py313.txt").read_text())
    assert crash is not None
    assert crash.said == (
        "the program's own host callback check_header (decoder.py:17) "
        "(in _parse_magic (decoder.py:12), which it called)"
    )


def test_a_thread_in_a_callback_that_the_signal_did_not_hit_names_none() -> None:
    # The hook's stack at os._exit: the watchdog's thread is the current one, the callback
    # runs in another.
    text = (STACKS / "pure_callback_at_own_exit.txt").read_text()
    assert running_in_callback(text) is not None
    assert crashed_in_callback(text) is None


def test_a_signal_in_xlas_own_execution_names_no_callback() -> None:
    assert crashed_in_callback((STACKS / "xla_executing_no_callback.txt").read_text()) is None


def test_an_exception_raised_in_a_helper_names_the_callback_jax_called() -> None:
    raised = raised_in_callback((ERRORS / "debug_callback_helper_raised.txt").read_text())
    assert raised is not None
    assert raised.callback == "record_grad_norm (gradnorm_monitor.py:36)"
    assert raised.where == "_edge_index (gradnorm_monitor.py:22)"
    assert raised.line == "ValueError: gradient norm 146 is beyond the last histogram edge 100"
    assert raised.said == (
        "raised in _edge_index (gradnorm_monitor.py:22), from the host callback record_grad_norm"
    )


def test_a_signal_in_the_programs_own_native_call_is_placed_there() -> None:
    """The thread the SIGSEGV hit was in ctypes.string_at, called from the program, with no
    jax frame on it (jaxlib 0.10.2's faulthandler stack of a real run)."""
    stack = (STACKS / "ctypes_segfault.txt").read_text()
    assert crashed_outside_jax(stack) == (
        "string_at (ctypes/__init__.py:519) from <module> (ctypes_crash.py:14)"
    )


@pytest.mark.parametrize(
    "name",
    [
        "helper_segfault_py313.txt",  # the same call, inside a host callback jax called
        "pure_callback_abort.txt",
        "xla_executing_no_callback.txt",  # no thread of Python's was hit: XLA's own
    ],
)
def test_a_thread_with_a_jax_frame_or_none_hit_is_not_the_programs_native_code(
    name: str,
) -> None:
    assert crashed_outside_jax((STACKS / name).read_text()) is None
