"""The launcher every child of xla-bugkit starts through (``proc.run``); stdlib only.

``python -I -S launch.py MEMORY FILE_SIZE GUARD_FD STATUS_FD PARENT_PID CMD...`` runs in
the child's fresh process group, then execs CMD, which keeps the launcher's pid. Before that:

- it applies the resource limits (setrlimit here rather than a ``preexec_fn``, which would
  force a plain fork() of a parent whose threads, JAX's say, may hold locks);
- on Linux it asks the kernel to SIGKILL it (and so CMD) when its parent dies
  (``PR_SET_PDEATHSIG``, kept across exec). The kernel sends it when the parent *thread*
  that forked the child ends: ``proc.run`` forks and waits in one thread, so that thread
  ends only after the child has;
- it leaves a guard in the group: a process that holds the read end of a pipe whose write
  end only the parent holds. When the parent closes it (the child is done, or the parent
  died, even by SIGKILL) the guard kills the whole group: grandchildren that CMD left
  behind (a shell script's background jobs) die with it. Only a process that leaves the
  group on purpose (``setsid``) escapes.

Exec errors go back to the parent through STATUS_FD (close-on-exec, like subprocess's own
pipe): the errno as text when exec failed, nothing when it succeeded.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        # The parent died before the request was made: the kernel will not tell us.
        os._exit(1)


def _guard(guard_fd: int, status_fd: int) -> None:
    """Start the guard as a grandchild of this process, so that CMD never waits for it."""
    middle = os.fork()
    if middle != 0:
        os.waitpid(middle, 0)
        return
    if os.fork() != 0:
        os._exit(0)
    try:
        # Signals meant for CMD (``kill 0`` in a script, the parent's SIGTERM) must not
        # take the guard with them; SIGKILL still can.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)
        # Off the child's output pipes and the exec-status pipe: the parent reads each to
        # its end.
        os.close(status_fd)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while os.read(guard_fd, 1):
            pass  # the parent never writes: only its end of the pipe closing wakes us
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def main(argv: Sequence[str]) -> None:
    memory, size = (int(v) if v != "-" else None for v in argv[:2])
    guard_fd, status_fd, parent = (int(v) for v in argv[2:5])
    command = list(argv[5:])
    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if size is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    _die_with_parent(parent)
    _guard(guard_fd, status_fd)
    os.close(guard_fd)
    # Python ignores these; an exec'd command must get them as usual (subprocess does too).
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    os.set_inheritable(status_fd, False)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        os.write(status_fd, str(e.errno or 0).encode())
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
