"""Watching an ``xla-bugkit`` process's replay children from outside, through /proc.

Each test gives the ``xla-bugkit`` it starts a tag in its environment; the replay child
inherits that environment, so its process is found by the tag (and by the worker module
on its command line) among everything else running on the machine.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

TAG = "XLA_BUGKIT_TEST_TAG"
# Not a limit on how fast anything must be: a bound that turns a test that can never see
# its replay child into a failure instead of a hang.
GIVE_UP_AFTER = 600.0

needs_proc = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="finds replay children through /proc"
)


def tagged_env() -> tuple[str, dict[str, str]]:
    """A fresh tag, and this process's environment on CPU carrying it."""
    tag = uuid.uuid4().hex
    return tag, {**os.environ, "JAX_PLATFORMS": "cpu", TAG: tag}


def replay_children(tag: str, *, loaded: bool = False) -> list[int]:
    """Live replay children carrying ``tag``; with ``loaded``, only those that have jaxlib
    mapped (so their parent has long been waiting on them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
            maps = (entry / "maps").read_bytes() if loaded else b"jaxlib"
        except OSError:
            continue  # gone, or not ours to read
        ours = f"{TAG}={tag}".encode() in env and b"xla_bugkit.replay.child.worker" in cmdline
        if ours and b"jaxlib" in maps:
            found.append(int(entry.name))
    return found


def wait_for_replay(tag: str, process: subprocess.Popen[str]) -> None:
    """Return once ``process`` has a replay child running jaxlib; fail if it ends first."""
    deadline = time.monotonic() + GIVE_UP_AFTER
    while not replay_children(tag, loaded=True):
        assert process.poll() is None, "xla-bugkit ended before any replay started"
        assert time.monotonic() < deadline, "no replay child appeared"
        time.sleep(0.1)
