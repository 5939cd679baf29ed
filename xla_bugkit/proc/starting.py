"""How every child starts: through ``launch.py``, in its own session, with its limits, a
guard pipe and an exec-status pipe (see the launcher's docstring); and the check, once it
has exec'd, that the command ran. ``run``, ``Waiting`` and ``serving.Serving`` all start
their children here.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.errors import ProcessError


@dataclass(frozen=True)
class Limits:
    """Resource limits applied in the child with setrlimit (None = inherit)."""

    memory_bytes: int | None = None
    file_size_bytes: int | None = None


# Every child starts through this launcher (limits, death with its parent, a guard that
# stops its whole process group when we are gone: see its docstring).
LAUNCHER = Path(__file__).with_name("launch.py")


@dataclass(frozen=True)
class Started:
    """A child, the write end of its group's guard pipe, and the read end of its exec
    status."""

    popen: subprocess.Popen[bytes]
    guard: int
    status: int


def _launcher_argv(
    argv: Sequence[str], limits: Limits | None, guard: int, status: int
) -> list[str]:
    limits = limits or Limits()
    values = ["-" if v is None else str(v) for v in (limits.memory_bytes, limits.file_size_bytes)]
    # -I -S: the launcher needs nothing but the standard library, and starts faster alone.
    return [
        sys.executable,
        "-I",
        "-S",
        str(LAUNCHER),
        *values,
        str(guard),
        str(status),
        str(os.getpid()),
        *argv,
    ]


def start(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    limits: Limits | None,
    stdin: int | None,
    echo: bool,
) -> Started:
    """Start ``argv`` through the launcher in a session of its own, its stdout a pipe (and
    its stderr one of its own with ``echo``, else merged into stdout); ``ProcessError``
    where it cannot start (``check_exec`` then tells whether its command ran)."""
    if not argv:
        raise ProcessError("cannot run an empty command")
    guard_read, guard_write = os.pipe()
    status_read, status_write = os.pipe()
    try:
        popen = subprocess.Popen(
            _launcher_argv(argv, limits, guard_read, status_write),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=stdin,
            stdout=subprocess.PIPE,
            # One pipe keeps the order of a quiet child's output exactly (the last line is
            # the one that names the failure); a streamed child keeps its two streams apart.
            stderr=subprocess.PIPE if echo else subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(guard_read, status_write),
        )
    except BaseException as e:
        os.close(guard_write)
        os.close(status_read)
        if isinstance(e, OSError):  # the working directory: the launcher itself is ours
            where = f" in {cwd}" if cwd is not None else ""
            raise ProcessError(f"cannot run {argv[0]!r}{where}: {e.strerror or e}") from e
        raise
    finally:
        # The child holds these ends now; ours would keep the pipes from ever closing.
        os.close(guard_read)
        os.close(status_write)
    return Started(popen, guard_write, status_read)


def check_exec(status: BinaryIO, argv: Sequence[str], popen: subprocess.Popen[bytes]) -> None:
    """Wait until the launcher has exec'd the command; raise ``ProcessError`` if it could not.

    ``status`` reaches its end at the exec (close-on-exec), or holds the errno of a failure.
    """
    written = status.read()
    if not written:
        return
    popen.wait()
    code = int(written)
    if code == errno.ENOENT:
        raise ProcessError(f"cannot run {argv[0]!r}: command not found")
    if code == errno.EACCES:
        raise ProcessError(f"cannot run {argv[0]!r}: permission denied")
    raise ProcessError(f"cannot run {argv[0]!r}: {os.strerror(code)}")
