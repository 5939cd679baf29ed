"""How a replay child starts: its environment, the worker's command line, and children
started ahead of their modules (``Spares``), which import jax while the parent works, or
kept for the next module where opening the platform is costly (``keeps``)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import platforms, proc
from xla_bugkit.hlo import flags
from xla_bugkit.proc import serving
from xla_bugkit.replay import protocol

if TYPE_CHECKING:
    from xla_bugkit.run.held import Held


def child_env(
    xla_flags: tuple[str, ...],
    platform: str,
    python: str | None = None,
    release: Path | None = None,
    tpu_args: tuple[str, ...] | None = None,
    compiler: Path | None = None,
) -> dict[str, str]:
    """The environment of a replay child: ours, with ``xla_flags`` and ``platform`` (on a
    TPU, ``tpu_args``, the recorded run's, are its LIBTPU_INIT_ARGS in place of ours);
    ``python``: the child runs under another interpreter (the program's), which has its own
    jax but maybe not protobuf, which the worker reads protos with: ours is lent to it;
    ``release``: an unpacked jaxlib release, first on the path (``inputs.Release``);
    ``compiler``: the library of another release of the platform's compiler, loaded in place
    of the installed one (``inputs.CompilerRelease``)."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = flags.join(xla_flags)
    found = platforms.find(platform)
    env["JAX_PLATFORMS"] = found.jax_platforms if found is not None else platform
    if found is not None and found.compiler_env is not None and tpu_args is not None:
        env[found.compiler_env] = flags.join(tpu_args)
    if found is not None and found.compiler_library_env is not None and compiler is not None:
        env[found.compiler_library_env] = str(compiler)
    # The child imports this package from wherever the parent found it; another
    # interpreter sees this package alone, never the numpy or jaxlib built for this one
    # that lie beside it in an installed site-packages.
    package = Path(__file__).resolve().parents[1]
    own = (_alone(package) if python is not None else None) or str(package.parent)
    lent = _alone(_protobuf_dir()) if python is not None else None
    first = str(release) if release is not None else None
    path = [first, own, env.get("PYTHONPATH"), lent]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    return env


def _protobuf_dir() -> Path:
    import google.protobuf

    return Path(google.protobuf.__file__).resolve().parents[1]


@functools.cache
def _alone(package: Path) -> str | None:
    """A folder holding only ``package`` (a link to it), for another interpreter's path:
    our ``google`` namespace (protobuf: abi3 wheels, so any Python 3 loads it) goes last and
    shadows none of that interpreter's own packages; this one goes first. Removed when this
    process exits."""
    folder = Path(tempfile.mkdtemp(prefix=f"xla-bugkit-{package.name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    try:
        (folder / package.name).symlink_to(package, target_is_directory=True)
    except OSError:
        return None
    return str(folder)


WORKER = (sys.executable, "-m", "xla_bugkit.replay.child.worker")


def worker(python: str | None) -> tuple[str, ...]:
    """The replay child's command under ``python`` (None: this interpreter)."""
    return WORKER if python is None else (python, *WORKER[1:])


# "1": a replay child is kept for the next module on every platform; "0": on none; unset: on
# those whose row says opening them is costly (``Platform.costly_start``).
KEEP_CHILD = "XLA_BUGKIT_KEEP_CHILD"


def keeps(platform: str) -> bool:
    """Whether a replay child of ``platform`` is kept for the next module (``Spares.serve``)."""
    asked = os.environ.get(KEEP_CHILD, "")
    if asked in ("0", "1"):
        return asked == "1"
    found = platforms.find(platform)
    return found is not None and found.costly_start


class Ahead:
    """Replays made ahead of the stage that asks for them (by the program held at its main
    module's end, before its run's record is final): how each ended and a copy of what it
    left in its ``out``, by what it was asked. A stage whose replay is asked exactly so
    (the same spec but its ``out``, its files unchanged, the same environment and memory
    limit) takes it from here (``spawn``); any other replays as always."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._done: dict[str, tuple[proc.Completed, Path]] = {}

    def __len__(self) -> int:
        return len(self._done)

    def keep(self, key: str, done: proc.Completed, out: Path) -> None:
        copy = self.folder / str(len(self._done))
        shutil.copytree(out, copy)
        self._done[key] = (done, copy)

    def take(self, key: str, out: Path) -> proc.Completed | None:
        found = self._done.get(key)
        if found is None:
            return None
        done, copy = found
        shutil.copytree(copy, out, dirs_exist_ok=True)
        return done


_AHEAD: list[Ahead] = []  # the replays made ahead in this collect (``made_ahead``)


@contextlib.contextmanager
def made_ahead(ahead: Ahead) -> Iterator[Ahead]:
    """Replays served in the block are kept in ``ahead``, and taken from it."""
    _AHEAD.append(ahead)
    try:
        yield ahead
    finally:
        _AHEAD.remove(ahead)


def any_made_ahead() -> bool:
    """Whether replays made ahead wait to be taken (``taken_ahead``)."""
    return bool(_AHEAD) and len(_AHEAD[-1]) > 0


def asked(env: Mapping[str, str], spec: Mapping[str, object], memory: int | None) -> str:
    """What a replay was asked, as ``Ahead`` knows it again: its spec less its ``out``, each
    file it names with its size and time, the environment that shapes it, the memory limit."""
    files = {}
    for name, value in spec.items():
        if name != "out" and isinstance(value, str) and os.path.isfile(value):
            st = os.stat(value)
            files[name] = (st.st_size, st.st_mtime_ns)
    rest = {k: v for k, v in spec.items() if k != "out"}
    return json.dumps([rest, files, sorted(env.items()), memory], sort_keys=True, default=str)


def taken_ahead(
    env: Mapping[str, str], spec: Mapping[str, object], memory: int | None
) -> proc.Completed | None:
    """The replay of ``spec`` as it was made ahead, its files now in its ``out``; None
    where it was not."""
    if not _AHEAD:
        return None
    return _AHEAD[-1].take(asked(env, spec, memory), Path(str(spec["out"])))


# Which replays the held program may serve: given the child's environment and its spec.
Serves = Callable[[Mapping[str, str], Mapping[str, object]], bool]


@dataclass(frozen=True)
class _Holding:
    """The program held at its main module's end, and what it may serve."""

    held: Held
    serves: Serves


@dataclass(frozen=True)
class _Kept:
    """A child that replayed a module and waits for the next, and what it started with."""

    argv: tuple[str, ...]
    env: dict[str, str]
    memory: int | None
    child: serving.Serving


class Spares:
    """Replay children started ahead of their modules: each imports jax (seconds, most of a
    small module's replay) while the parent unpacks a bundle or replays the module before.
    ``judge.replay`` hands the next one its module when that module's child would start with the
    same environment, and stops it and starts a child afresh otherwise. Children left over
    are stopped when the block ends.

    On a platform whose opening is costly (``keeps``: a TPU's chip, seconds each time, and
    only one process may hold it), the child that replayed a module is kept for the next
    module of the same environment (``serve``); one child at a time is kept."""

    def __init__(self) -> None:
        self._waiting: deque[tuple[dict[str, str], proc.Waiting | serving.Serving]] = deque()
        self._kept: _Kept | None = None
        self._holding: _Holding | None = None
        self._only_held = False
        self.in_program: list[str] = []  # the ``out`` of each replay the program served

    def __enter__(self) -> Spares:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._holding is not None:  # nothing after the block needs its device
            self._holding.held.let_go()
            self._holding = None
        self.let_go()
        while self._waiting:
            self._waiting.popleft()[1].stop()

    def __len__(self) -> int:
        return len(self._waiting)

    def start(
        self,
        platform: str,
        env_flags: Sequence[str] = (),
        tpu_args: tuple[str, ...] | None = None,
    ) -> None:
        """Start a child for a module of ``platform`` whose XLA_FLAGS at start-up are
        ``env_flags`` (``spawn.split_flags``) and LIBTPU_INIT_ARGS ``tpu_args``; on a
        platform that ``keeps`` its child, none while one is kept or waits; none while the
        program is held (``hold``): it makes the replays, and holds the device."""
        if self._holding is not None:
            return
        env = child_env(tuple(env_flags), platform, tpu_args=tpu_args)
        if not keeps(platform):
            waiting = proc.start_waiting([*WORKER, protocol.SPEC_ON_STDIN], env=env)
            self._waiting.append((env, waiting))
            return
        # One such child at a time: the kept one most likely serves the next module too, and
        # a spare started with another environment (flags only the module's replay knows)
        # would wait unused until the block ends.
        if self._kept is not None or any(isinstance(w, serving.Serving) for _, w in self._waiting):
            return
        self._waiting.append((env, _serving(_SERVE, env)))

    def take(self, env: dict[str, str]) -> proc.Waiting | None:
        """The next child, if it was started with ``env``; else None (and it is stopped)."""
        if not self._waiting:
            return None
        started, waiting = self._waiting.popleft()
        if started == env and isinstance(waiting, proc.Waiting):
            return waiting
        waiting.stop()
        return None

    def serve(
        self,
        worker: Sequence[str],
        env: dict[str, str],
        memory: int | None,
        spec: Mapping[str, object],
        *,
        timeout: float,
    ) -> proc.Completed:
        """Replay ``spec`` in the kept child where it started as this one would (``worker``,
        ``env``, the ``memory`` limit), else in a spare or a fresh child, kept in its turn
        unless it crashed or hung: how the module's replay ended, as a child of its own
        would have ended with it (its status, its part of the output)."""
        argv = (*worker, protocol.SPECS_ON_STDIN)
        request = json.dumps({**spec, "memory_limit": memory})
        served = self._in_program(env, spec, request.encode(), timeout)
        if served is not None:
            return served
        if self._only_held:
            return proc.Completed(None, "", False, 0.0)  # not replayed: no child starts
        kept, self._kept = self._kept, None
        if kept is not None and (kept.argv, kept.env, kept.memory) != (argv, env, memory):
            kept.child.stop()  # one child holds the device at a time
            kept = None
        child = kept.child if kept is not None else self._spare(argv, env) or _serving(argv, env)
        reply = child.ask(request.encode(), timeout=timeout)
        if child.alive:
            self._kept = _Kept(argv, env, memory, child)
        lines = reply.output.splitlines(keepends=True)
        output = "".join(line for line in lines if not line.startswith(protocol.STARTS))
        status = reply.returncode if reply.answer is None else int(reply.answer.split()[-1])
        return proc.Completed(status, output, reply.timed_out, reply.duration)

    def hold(self, held: Held, serves: Serves, *, alone: bool = False) -> None:
        """Ask the program's own process, ``held`` at its main module's end, for the
        replays it ``serves`` (``serve``) until ``let_go``; the others go to children,
        once the program has let go of the device. ``alone``: no child ever starts, and
        a replay the program does not make is not made (its ``Completed`` never started:
        for replays made ahead, which a later stage makes where these did not)."""
        self.let_go()
        self._holding = _Holding(held, serves)
        self._only_held = alone

    @property
    def holding(self) -> bool:
        """Whether replays go to the held program (or, ``alone``, nowhere else)."""
        return self._holding is not None or self._only_held

    @property
    def held(self) -> bool:
        """Whether the held program still makes replays."""
        return self._holding is not None

    def _in_program(
        self, env: dict[str, str], spec: Mapping[str, object], request: bytes, timeout: float
    ) -> proc.Completed | None:
        """The replay as the held program served it; None where it may not serve it, or
        ended without an answer (a crash, a hang: it is ended, and the replay runs again in
        a fresh child, which the judge reads as it reads every child's end)."""
        holding = self._holding
        if holding is None:
            return None
        if not holding.serves(env, spec):
            self.let_go()  # the device is the child's now
            return None
        reply = holding.held.ask(request, timeout=timeout)
        if reply.answer is None:  # it has ended, or was ended
            self.let_go()
            return None
        self.in_program.append(str(spec.get("out")))
        lines = reply.output.splitlines(keepends=True)
        output = "".join(line for line in lines if not line.startswith(protocol.STARTS))
        status = int(reply.answer.split()[-1])
        done = proc.Completed(status, output, reply.timed_out, reply.duration)
        if _AHEAD:
            memory = json.loads(request).get("memory_limit")
            _AHEAD[-1].keep(asked(env, spec, memory), done, Path(str(spec["out"])))
        return done

    def let_go(self) -> None:
        """Stop the kept child, if any, and let the held program go on to its exit:
        another process is about to open its device."""
        holding, self._holding = self._holding, None
        if holding is not None:
            holding.held.let_go(wait=True)  # until it has let go of the device
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.child.stop()

    def _spare(self, argv: tuple[str, ...], env: dict[str, str]) -> serving.Serving | None:
        """A spare started with ``argv`` and ``env`` to be kept, taken from the others."""
        if argv != _SERVE:
            return None
        for entry in list(self._waiting):
            started, waiting = entry
            if started == env and isinstance(waiting, serving.Serving):
                self._waiting.remove(entry)
                return waiting
        return None


_SERVE = (*WORKER, protocol.SPECS_ON_STDIN)


def _serving(argv: Sequence[str], env: dict[str, str]) -> serving.Serving:
    return serving.start_serving(argv, answer=protocol.ENDED, env=env)
