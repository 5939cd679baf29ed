"""The probe server: a process that has imported jax, and forks one child per probe.

A fresh Python process costs seconds (``import jax`` alone); a fork of one that already has
it costs a fraction of that. The server itself never makes an XLA call: XLA reads
``XLA_FLAGS`` once per process, at its first call, so a server that had made one would pin
its flags on every child. Each child sets ``XLA_FLAGS`` for its probe, then works.

Protocol (JSON lines): the server prints ``{"ready": true}``; then for each request
``{"spec": PATH, "xla_flags": STR, "timeout": S}`` it replies
``{"returncode": N, "timed_out": B, "seconds": S}``. The child's stdout and stderr go to
``output.txt`` beside the spec. The server dies with its parent, and each child with it.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
OUTPUT = "output.txt"


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` (the thread that started it) ends."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the parent is gone already: the kernel will not tell us


def _child(request: dict[str, Any], server: int) -> None:
    code = 1
    try:
        die_with_parent(server)
        spec = Path(request["spec"])
        out = os.open(spec.parent / OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.environ["XLA_FLAGS"] = request["xla_flags"]
        from xla_bugkit.shrink import child

        code = child.main([str(spec)])
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _probe(request: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(request, server)
    deadline = started + float(request["timeout"])
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            timed_out = True
            break
        time.sleep(0.005)
    return {
        "returncode": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "seconds": time.monotonic() - started,
    }


def serve(parent: int) -> None:
    die_with_parent(parent)
    # What every probe needs, loaded once; none of it calls into XLA.
    import jax  # noqa: F401
    import numpy  # noqa: F401

    from xla_bugkit.replay import protocol  # noqa: F401
    from xla_bugkit.shrink import child  # noqa: F401

    reply = sys.stdout
    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        answer = _probe(json.loads(line))
        reply.write(json.dumps(answer) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
