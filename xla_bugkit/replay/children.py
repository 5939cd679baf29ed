"""How a replay child starts: its environment, the worker's command line, and children
started ahead of their modules (``Spares``), which import jax while the parent works."""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import flags, proc
from xla_bugkit.replay import protocol


def child_env(xla_flags: tuple[str, ...], platform: str) -> dict[str, str]:
    """The environment of a replay child: ours, with ``xla_flags`` and ``platform``."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = flags.join(xla_flags)
    env["JAX_PLATFORMS"] = platform
    # The child imports this package from wherever the parent found it.
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


WORKER = (sys.executable, "-m", "xla_bugkit.replay.worker")


class Spares:
    """Replay children started ahead of their modules: each imports jax (seconds, most of a
    small module's replay) while the parent unpacks a bundle or replays the module before.
    ``judge.replay`` hands the next one its module when that module's child would start with the
    same environment, and stops it and starts a child afresh otherwise. Children left over
    are stopped when the block ends."""

    def __init__(self) -> None:
        self._waiting: deque[tuple[dict[str, str], proc.Waiting]] = deque()

    def __enter__(self) -> Spares:
        return self

    def __exit__(self, *exc: object) -> None:
        while self._waiting:
            self._waiting.popleft()[1].stop()

    def __len__(self) -> int:
        return len(self._waiting)

    def start(self, platform: str, env_flags: Sequence[str] = ()) -> None:
        """Start a child for a module of ``platform`` whose XLA_FLAGS at start-up are
        ``env_flags`` (``judge.split_flags``)."""
        env = child_env(tuple(env_flags), platform)
        waiting = proc.start_waiting([*WORKER, protocol.SPEC_ON_STDIN], env=env)
        self._waiting.append((env, waiting))

    def take(self, env: dict[str, str]) -> proc.Waiting | None:
        """The next child, if it was started with ``env``; else None (and it is stopped)."""
        if not self._waiting:
            return None
        started, waiting = self._waiting.popleft()
        if started == env:
            return waiting
        waiting.stop()
        return None
