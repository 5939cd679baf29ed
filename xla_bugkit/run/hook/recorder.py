"""The recorder each Python process of a rerun carries: what it did, written as it happens.

Loaded by the start-up hook (``site/sitecustomize.py``) by file path, in the user's own
interpreter, once the program has imported jax, TensorFlow or torch_xla: standard library
only, and nothing may raise into the program. It opens ``<folder>/<pid>.jsonl``, records the
interpreter and the versions it imported, patches jax (``jax_patches``) or TensorFlow
(``tf_patches``), and keeps collect's XLA flags in XLA_FLAGS (``xla_flags``). The format is
documented, and read, by ``xla_bugkit.run.evidence_files``.

Each record is one ``os.write`` on an ``O_APPEND`` descriptor: a crash loses at most the
line being written, and nothing waits on a buffer.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

# The most bytes of execution arguments one process keeps (``save_arrays``): collect's
# --max-dump-size; 64 MiB when the variable is absent or unreadable.
try:
    ARGS_BUDGET = int(os.environ.get("XLA_BUGKIT_ARGS_BUDGET", 64 << 20))
except ValueError:
    ARGS_BUDGET = 64 << 20
# Save the arguments of each compiled function's first execution (XLA writes no snapshots).
FIRST_ARGUMENTS = os.environ.get("XLA_BUGKIT_FIRST_ARGUMENTS") == "1"
# Limits a program may lower itself, and that a replay should then share.
_LIMITS = (
    "RLIMIT_AS",
    "RLIMIT_DATA",
    "RLIMIT_STACK",
    "RLIMIT_FSIZE",
    "RLIMIT_NOFILE",
    "RLIMIT_CPU",
)


class Recorder:
    """One process's evidence file; after a fork the child gets a file of its own."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.fd = -1
        self.pid = 0
        self.stack_file: Any = None
        self.lock = threading.Lock()
        self.sequence = 0
        self.saved: list[tuple[str, int]] = []  # argument files kept, oldest first
        self.saved_bytes = 0
        self.first_arguments = FIRST_ARGUMENTS  # save each function's first arguments
        self.answer: Callable[[], dict[str, Any]] | None = None  # what ``state`` records
        self.flags_at_backend = False  # jax's backend start calls ``xla_flags.keep``

    def next_n(self) -> int:
        with self.lock:
            self.sequence += 1
            return self.sequence

    def open(self) -> None:
        """Start this process's file (again, in a forked child) with its start record."""
        self.pid = os.getpid()
        self.sequence = 0
        self.saved, self.saved_bytes = [], 0  # a forked child starts its own
        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, f"{self.pid}.jsonl")
        old, self.fd = self.fd, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if old >= 0:
            _close_quietly(old)
        self.write(
            "start",
            pid=self.pid,
            ppid=os.getppid(),
            argv=list(getattr(sys, "argv", [])),
            cwd=_cwd(),
            rlimits=current_limits(),
        )
        self._catch_stacks()
        self._listen()

    @staticmethod
    def versions() -> dict[str, str]:
        """``versions``, for the patches, which reach this module only through a recorder
        (both are loaded by file path)."""
        return versions()

    @staticmethod
    def load_sibling(name: str) -> Any:
        """The hook's module ``name`` (``waiting``, say), loaded by file path once."""
        return _load_sibling(name)

    def answer_with(self, answer: Callable[[], dict[str, Any]]) -> None:
        """Answer collect's question "what are you doing?" with a ``state`` record of
        ``answer()`` (see ``_listen``)."""
        self.answer = answer
        self._listen()

    def _listen(self) -> None:
        """A thread of the hook's own waits, at no cost, on ``<pid>.ask`` (a FIFO) for
        collect's question, asked before it stops the run. A main thread waiting on a
        computation that never ends runs no signal handler, so only another thread can
        still say what the process was waiting for."""
        if self.answer is None:
            return
        path = os.path.join(self.folder, f"{self.pid}.ask")
        try:
            os.mkfifo(path, 0o600)
        except OSError:  # a file system without FIFOs: no answers, nothing else lost
            return
        listener = threading.Thread(
            target=self._answering, args=(path,), name="xla-bugkit-answer", daemon=True
        )
        listener.start()

    def _answering(self, path: str) -> None:
        while os.getpid() == self.pid:
            try:
                fd = os.open(path, os.O_RDONLY)  # waits for collect to open it
            except OSError:
                return
            try:
                asked = os.read(fd, 16)
            except OSError:
                asked = b""
            finally:
                _close_quietly(fd)
            if not asked or self.answer is None:
                continue
            try:
                fields = self.answer()
            except Exception as e:  # still an answer: collect stops waiting
                fields = {"error": f"{type(e).__name__}: {e}"}
            self.write("state", **fields)

    def write(self, event: str, **fields: Any) -> None:
        if self.fd < 0 or os.getpid() != self.pid:
            return
        try:
            line = json.dumps({"e": event, "t": time.time(), **fields}, default=str)
            os.write(self.fd, line.encode("utf-8", "replace") + b"\n")
        except Exception:  # a record lost is better than a program broken
            pass

    def budget(self) -> int:
        """The most bytes of arguments one save may hold."""
        return ARGS_BUDGET

    def save_arrays(
        self, n: int, arrays: list[Any], record: str = "args", stem: str = "args", **fields: Any
    ) -> str | None:
        """Save the arguments of execution ``n`` as ``<pid>.args-<n>.npz`` and record it
        (``record``: ``args``, or ``inputs`` with ``fields`` for another framework's call;
        ``outputs`` and ``stem`` "outputs" for its outputs, ``<pid>.outputs-<n>.npz``).

        The newest are what matter (the execution under way at a crash): older files go
        once the process's files pass ``ARGS_BUDGET`` bytes; arguments larger than the whole
        budget are not saved at all. Returns the file's name, None where it was not saved.
        """
        import numpy as np

        values = [np.asarray(a) for a in arrays]
        size = sum(v.nbytes for v in values)
        if size > ARGS_BUDGET:
            self.write("args_skipped", n=n, bytes=size)
            return None
        while self.saved and self.saved_bytes + size > ARGS_BUDGET:
            old, old_size = self.saved.pop(0)
            self.saved_bytes -= old_size
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.folder, old))
        name = f"{self.pid}.{stem}-{n}.npz"
        partial = os.path.join(self.folder, f".{name}.partial")
        with open(partial, "wb") as f:
            np.savez(f, *values)
        os.replace(partial, os.path.join(self.folder, name))
        self.saved.append((name, size))
        self.saved_bytes += size
        self.write(record, n=n, file=name, bytes=size, **fields)
        return name

    def drop(self, name: str) -> None:
        """Delete a file ``save_arrays`` kept (a newer one stands for it)."""
        for i, (kept, size) in enumerate(self.saved):
            if kept == name:
                del self.saved[i]
                self.saved_bytes -= size
                break
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.folder, name))

    def _catch_stacks(self) -> None:
        """faulthandler writes the Python stack on a fatal signal, and on SIGTERM/SIGINT
        before the handler that was there runs as before."""
        path = os.path.join(self.folder, f"{self.pid}.stack.txt")
        if self.stack_file is not None:
            self.stack_file.close()
        self.stack_file = open(path, "w")  # noqa: SIM115  # faulthandler keeps it open
        # A program that enabled faulthandler itself keeps its own choice.
        if not faulthandler.is_enabled():
            faulthandler.enable(self.stack_file, all_threads=True)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
                faulthandler.register(sig, self.stack_file, all_threads=True, chain=True)


def current_limits() -> dict[str, list[int]]:
    try:
        import resource
    except ImportError:  # not on this platform
        return {}
    out = {}
    for name in _LIMITS:
        number = getattr(resource, name, None)
        if number is not None:
            soft, hard = resource.getrlimit(number)
            out[name] = [soft, hard]
    return out


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return ""


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


RECORDER: Recorder | None = None


def _watch_setrlimit(recorder: Recorder) -> None:
    """``resource.setrlimit`` records what the program sets, then does exactly that."""
    import resource

    original = resource.setrlimit
    names = {getattr(resource, n): n for n in _LIMITS if hasattr(resource, n)}

    def setrlimit(which: int, limits: Any, /) -> None:
        original(which, limits)
        try:
            soft, hard = limits
            recorder.write("rlimit", name=names.get(which, str(which)), soft=soft, hard=hard)
        except Exception:
            pass

    resource.setrlimit = setrlimit


def jax_imported() -> None:
    """jax has just been imported: start this process's file and patch jax. collect's XLA
    flags go back into XLA_FLAGS when jax starts its first backend (the program may still
    set its own until then), or now where the patch of that could not be made."""
    _patch("jax_patches")
    if RECORDER is not None and not RECORDER.flags_at_backend:
        _load_sibling("xla_flags").keep(RECORDER)


def tensorflow_imported() -> None:
    """TensorFlow has just been imported: start this process's file (unless jax did) and
    record the inputs of its ``jit_compile`` functions (``tf_patches``); collect's XLA flags
    go back into XLA_FLAGS now, before TensorFlow's XLA reads them."""
    _patch("tf_patches")
    if RECORDER is not None:
        _load_sibling("xla_flags").keep(RECORDER)


def torch_xla_imported() -> None:
    """torch_xla has just been imported: start this process's file (unless jax or
    TensorFlow did), for what it records of the process (its versions above all; nothing
    of torch_xla is patched)."""
    _record_versions()


# The modules whose versions tell what the program ran, read from those it imported.
_VERSIONED = ("jax", "jaxlib", "numpy", "ml_dtypes", "tensorflow", "torch", "torch_xla")


def versions() -> dict[str, str]:
    """This interpreter's own versions, and the interpreter: the program may run under
    another than xla-bugkit's (a venv of its own), with other releases. Read from what is
    imported already: nothing is imported for it."""
    found = {"python": sys.version.split()[0], "python_executable": sys.executable}
    for name in _VERSIONED:
        for module in (name, f"{name}.version"):  # jaxlib and torch_xla keep it there too
            version = getattr(sys.modules.get(module), "__version__", None)
            if isinstance(version, str):  # torch's is a str subclass
                found[name] = str(version)
                break
    return found


def _record_versions() -> None:
    """A ``versions`` record, as each watched framework is imported: one that starts no
    backend the hook sees (TensorFlow, PyTorch/XLA) has no other record of them."""
    recorder = _started()
    if recorder is not None:
        try:
            recorder.write("versions", versions=versions())
        except Exception as e:
            recorder.write("hook_error", error=f"versions: {type(e).__name__}: {e}")


def _patch(patches_name: str) -> None:
    recorder = _started()
    if recorder is None:
        return
    try:
        patches = _load_sibling(patches_name)
        patches.apply(recorder)
    except Exception as e:
        recorder.write("hook_error", error=f"{type(e).__name__}: {e}")
    _record_versions()


def _started() -> Recorder | None:
    """This process's recorder, started on the first call."""
    global RECORDER
    folder = os.environ.get("XLA_BUGKIT_PROCESSES")
    if RECORDER is not None or not folder:
        return RECORDER
    recorder = Recorder(folder)
    recorder.open()
    RECORDER = recorder
    try:
        _load_sibling("ending").watch(recorder)
    except Exception as e:
        recorder.write("hook_error", error=f"ending: {type(e).__name__}: {e}")
    os.register_at_fork(after_in_child=_after_fork)
    _watch_setrlimit(recorder)
    return recorder


def _after_fork() -> None:
    if RECORDER is not None:
        try:
            RECORDER.open()
        except Exception:
            RECORDER.fd = -1


def _load_sibling(name: str) -> Any:
    import importlib.util

    if (loaded := sys.modules.get(f"_xla_bugkit_{name}")) is not None:
        return loaded
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_xla_bugkit_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
