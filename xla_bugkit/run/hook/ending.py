"""How a process of the run ends, as its recorder records it (loaded by file path, as the
recorder is; standard library only): the ``exit`` record (and ``exiting``, the status the
program asked sys.exit for, written as it asks), exceptions Python prints and goes
on from (``uncaught``), the stack of a program that ends itself with ``os._exit`` while its
own host callback runs, and the word to collect that the program's main module has
finished."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import re
import sys
import threading
from typing import Any, NoReturn

# The first line of the stack ``os._exit`` leaves (``weigh`` reads it), and the modules
# through which jax calls a host callback.
OWN_EXIT = "Program called os._exit({status}) with its own host callback running"
_JAX_CALLING = re.compile(r"[/\\]jax[/\\]_src[/\\](?:callback|debugging)\.py$")
_JAX_OWN = re.compile(r"[/\\](?:jax|jaxlib)[/\\]")


def watch(recorder: Any) -> None:
    """Record how ``recorder``'s process exits, and tell collect when its main module ends."""
    _record_exit(recorder)
    _note_exit_message()
    _record_uncaught(recorder)
    _stack_at_own_exit(recorder)
    _tell_main_end(recorder)


_STATUSES: list[int] = []


def _foreseen() -> int:
    """The status the process will exit with, as far as its main module's end shows it: an
    uncaught exception's 1, sys.exit's own, else 0 (its teardown may yet change it)."""
    if getattr(sys, "last_value", None) is not None:
        return 1
    if _STATUSES:
        return _STATUSES[-1]
    return 1 if _EXIT_MESSAGE else 0


# Set when the interpreter itself, outside every frame, wrote to stderr in the main thread:
# ``raise SystemExit(message)`` ends the main module so (Python prints the message, exits 1).
_EXIT_MESSAGE: list[bool] = []


def _note_exit_message() -> None:
    """Note a write to ``sys.stderr`` that no Python frame made, in the main thread: by the
    main module's end only the interpreter writes so, printing the message of the
    ``SystemExit`` that ended it (``raise SystemExit(message)``, ``exit(message)``: no
    sys.exit call to note, no traceback). An uncaught exception's traceback is written so
    too, and shows already (``sys.last_value``). The stream's own ``write`` is shadowed on
    the instance, and the write done by it as before; a stream that takes no attribute is
    left alone."""
    stream = sys.stderr
    original = getattr(stream, "write", None)
    if original is None:
        return
    main = threading.main_thread()

    def write(text: Any) -> Any:
        try:
            sys._getframe(1)
        except ValueError:  # no caller frame: the interpreter's own write
            if threading.current_thread() is main and not _EXIT_MESSAGE:
                _EXIT_MESSAGE.append(True)
        return original(text)

    with contextlib.suppress(AttributeError, TypeError):
        stream.write = write  # type: ignore[method-assign]  # on this instance only


def _record_exit(recorder: Any) -> None:
    """The ``exit`` record, at atexit: how the interpreter is leaving."""
    statuses = _STATUSES  # what the program asked sys.exit for, the last call last
    original = sys.exit

    def noting_exit(status: object = None, /) -> Any:
        # A SystemExit leaves no trace by the time atexit runs: its status is noted here,
        # then sys.exit does exactly what it did.
        code = 0 if status is None else status if isinstance(status, int) else 1
        statuses.append(code)
        if threading.current_thread() is threading.main_thread():
            _said_at_once(recorder, code)
        _settle_outputs(recorder)
        return original(status)  # type: ignore[arg-type]  # as the program passed it

    def on_exit() -> None:
        # An uncaught exception was printed before atexit runs, leaving sys.last_value.
        if getattr(sys, "last_value", None) is not None:
            recorder.write("exit", status=1, how="exception")
        elif statuses:
            recorder.write("exit", status=statuses[-1], how="sys.exit")
        elif _EXIT_MESSAGE:  # the interpreter printed a SystemExit's message: status 1
            recorder.write("exit", status=1, how="SystemExit")
        else:
            recorder.write("exit", status=None)

    sys.exit = noting_exit
    atexit.register(on_exit)


def _said_at_once(recorder: Any, code: int) -> None:
    """The program's word as it calls sys.exit, before its exit can be cut short: in a
    ``jax.distributed`` job Python then waits at the shutdown barrier (an atexit function),
    where the job's coordination service may abort the process before the ``exit`` record
    is written and before Python flushes what the program printed. The record
    (``exiting``) goes straight to its file; the program's own streams are flushed, unless
    that raises (a closed stream, a flush already under way in this thread)."""
    recorder.write("exiting", status=code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def _settle_outputs(recorder: Any) -> None:
    """The last pass over the executions still watched (``ready``), while the program's
    frames hold their outputs: a program that met XLA's error reading an output and calls
    sys.exit from its ``except`` (its own message, its own status) drops those outputs as
    SystemExit unwinds, before atexit's pass could read the error from them. Only where
    jax's patches loaded ``ready``; nothing may raise into the program."""
    ready = sys.modules.get("_xla_bugkit_ready")
    if ready is not None:
        with contextlib.suppress(Exception):
            ready.settle(recorder)


def _record_uncaught(recorder: Any) -> None:
    """An exception that ends a thread, or that an atexit function raises, is printed and
    Python goes on: the exit status never shows it (a worker thread's XLA error, an
    evaluation at exit). Each is recorded (``uncaught``: where, the exception's type as
    ``module.QualName``, its first line), then handled as it was."""
    thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook

    def excepthook(args: Any) -> None:
        name = getattr(args.thread, "name", None) or "?"
        _note(recorder, f"thread {name!r}", args.exc_type, args.exc_value)
        thread_hook(args)

    def unraisablehook(unraisable: Any) -> None:
        # An atexit function's ("Exception ignored in atexit callback"); a finalizer's at
        # teardown (an array freed after its backend) is no failure of the program.
        if "atexit" in (unraisable.err_msg or ""):
            _note(recorder, "an atexit function", unraisable.exc_type, unraisable.exc_value)
        unraisable_hook(unraisable)

    threading.excepthook = excepthook
    sys.unraisablehook = unraisablehook


def _stack_at_own_exit(recorder: Any) -> None:
    """``os._exit`` (a watchdog's) leaves no record and runs no atexit: when a thread is
    inside the program's own host callback then, every thread's stack is written where
    faulthandler writes a stop's, under a line that says it was the program's exit, so that
    the hang is told to be the callback's. Nothing is written otherwise."""
    original = os._exit

    def exiting(status: int, /) -> NoReturn:
        try:
            stack = getattr(recorder, "stack_file", None)
            if stack is not None and _in_callback():
                stack.write(OWN_EXIT.format(status=status) + "\n\n")
                stack.flush()
                faulthandler.dump_traceback(stack, all_threads=True)
        except Exception:  # the exit must happen whatever this meets
            pass
        original(status)

    setattr(os, "_exit", exiting)  # noqa: B010  # replaced on its module, as sys.exit is


def _in_callback() -> bool:
    """Whether a thread is in a frame of the program's own that jax's callback called."""
    for frame in sys._current_frames().values():
        while frame is not None and frame.f_back is not None:
            caller = frame.f_back.f_code.co_filename
            if _JAX_CALLING.search(caller) and not _JAX_OWN.search(frame.f_code.co_filename):
                return True
            frame = frame.f_back
    return False


def _note(recorder: Any, where: str, kind: Any, value: Any) -> None:
    try:
        if kind is None or issubclass(kind, (SystemExit, KeyboardInterrupt)):
            return
        lines = str(value).strip().splitlines()
        recorder.write(
            "uncaught",
            where=where,
            type=f"{kind.__module__}.{kind.__qualname__}",
            error=f"{kind.__name__}: {lines[0][:300] if lines else ''}",
        )
    except Exception:  # a record lost is better than a program broken
        pass


def _tell_main_end(recorder: Any) -> None:
    """Tell collect when the program's main module has finished, through the FIFO that
    ``XLA_BUGKIT_MAIN_END`` names (``<collect's pid>:<path>``): Python then waits for the
    program's threads and runs its atexit functions (jax's own teardown: a tenth of a
    second or more), which collect spends on the bundle's first stages. Only the process
    collect started tells: a worker's end is not the program's. Writes this pid, or
    nothing when collect no longer listens. Where collect asked (``_SERVE_HERE``), the
    process then serves collect's replays before it goes on (``_serve``)."""
    parent, _, path = os.environ.get("XLA_BUGKIT_MAIN_END", "").partition(":")
    # Run by threading's shutdown, before atexit's functions (CPython 3.9 and later).
    register = getattr(threading, "_register_atexit", None)
    if not path or register is None or parent != str(os.getppid()):
        return
    pid = os.getpid()

    def tell() -> None:
        if os.getpid() != pid:
            return
        requests = _open_requests()  # before the word: collect asks once it hears it
        if requests is not None:
            _drained()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody listens
        except OSError:
            fd = None
        if fd is not None:
            try:
                os.write(fd, f"{pid} {_foreseen()}".encode())
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if requests is not None:
            _serve(requests, recorder)

    with contextlib.suppress(RuntimeError):  # already shutting down
        register(tell)


# JSON, [requests FIFO, answers FIFO, bound in seconds]: collect's replays are served here
# (``xla_bugkit.replay.child.in_program``, imported from ``_SERVE_PATH``).
_SERVE_HERE = "XLA_BUGKIT_SERVE_HERE"
_SERVE_PATH = "XLA_BUGKIT_SERVE_PATH"
_SERVER = "xla_bugkit.replay.child.in_program"
_NOT_HERE = "XLA_BUGKIT_NOT_HERE: "


def _drained(bound: float = 1.0) -> None:
    """Until collect has read what this process wrote to its stdout and stderr (pipes: the
    bytes still in them, FIONREAD), at most ``bound`` seconds: the record collect makes at
    the word reads the output so far."""
    try:
        import fcntl
        import struct
        import termios
        import time
    except ImportError:  # not on this system: the record may miss the last lines
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    deadline = time.monotonic() + bound
    for fd in (1, 2):
        while time.monotonic() < deadline:
            try:
                left = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
            except OSError:  # not a pipe
                break
            if left == 0:
                break
            time.sleep(0.002)


def _open_requests() -> int | None:
    """The requests FIFO's reading end, where collect asked for replays here."""
    try:
        requests = _asked()[0]
        return os.open(requests, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError, IndexError, TypeError):  # not asked, or not as it should be
        return None


def _asked() -> list[Any]:
    import json

    asked = json.loads(os.environ.get(_SERVE_HERE) or "[]")
    return asked if isinstance(asked, list) else []


def _serve(requests: int, recorder: Any) -> None:
    """Serve collect's replays in this process (loaded by name: this package's server,
    from the folder collect gave, never the program's own path), then go on to the exit.
    Whatever fails here ends the serving, never the program."""
    folder = os.environ.get(_SERVE_PATH, "")
    try:
        _, answers_path, bound = _asked()
        answers = os.open(answers_path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: collect is gone
    except (OSError, ValueError, TypeError):
        os.close(requests)
        return
    try:
        os.set_blocking(answers, True)
        sys.path.insert(0, folder)
        # threading's shutdown has begun: a module that registers its own exit with it
        # (concurrent.futures) would refuse to load. Its exit is not run (the list was read
        # before), and the server leaves no thread of its own behind it.
        shutting = getattr(threading, "_SHUTTING_DOWN", False)
        try:
            import importlib

            threading._SHUTTING_DOWN = False  # type: ignore[attr-defined]
            server = importlib.import_module(_SERVER)
        except Exception as e:
            os.write(answers, f"{_NOT_HERE}{type(e).__name__}: {e}\n".encode())
            return
        finally:
            threading._SHUTTING_DOWN = shutting  # type: ignore[attr-defined]
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
        server.serve(requests, answers, float(bound), recorder)
    except Exception:  # the program's own exit goes on
        pass
    finally:
        for fd in (requests, answers):
            with contextlib.suppress(OSError):
                os.close(fd)
