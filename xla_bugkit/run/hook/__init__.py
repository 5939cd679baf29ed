"""The start-up hook that puts a recorder into every Python process of a rerun.

``environment`` prepends ``site/`` (which holds nothing but a ``sitecustomize.py``) to
``PYTHONPATH`` and names the folder the processes write to. Launchers, shells,
``multiprocessing`` and subprocesses inherit both, so every Python process of the run loads
the hook at start-up; one that never imports jax pays for a file lookup and nothing more.

The hook runs inside the user's interpreter, which may not have xla-bugkit installed, so
``recorder`` and its siblings (``jax_patches``, ...) use the standard library only and are
loaded by file path, never through ``sys.path``. What they write is read back by
``evidence_files``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"
# Where each process writes its evidence (``<work>/processes``).
ENV_PROCESSES = "XLA_BUGKIT_PROCESSES"
# The --xla_dump_to the rerun gave; a process moves it to a folder of its own.
ENV_DUMP_DIR = "XLA_BUGKIT_DUMP_DIR"
ENV_FIRST_ARGUMENTS = "XLA_BUGKIT_FIRST_ARGUMENTS"
# Where JAX writes each function's jaxpr as it lowers it: a folder of the process's dump
# folder (JAX_DUMP_IR_TO, JAX_DUMP_IR_MODES=jaxpr), moved with it (``jax_backend``).
JAXPRS = "jaxprs"
ENV_ARGS_BUDGET = "XLA_BUGKIT_ARGS_BUDGET"
# collect's XLA flags, which the hook puts back into XLA_FLAGS before XLA reads it when the
# program replaced them (``os.environ["XLA_FLAGS"] = "--xla_..."``), or was given none to
# keep its own ``setdefault`` working (``xla_flags.keep``).
ENV_XLA_FLAGS = "XLA_BUGKIT_XLA_FLAGS"
# The log settings the user had before collect's (JSON: name -> value, null for unset), and
# collect's pid: a process whose stderr its parent took for itself gets the user's back
# (``site/sitecustomize.py``), so that its parent reads what it would read bare.
ENV_LOG_BEFORE = "XLA_BUGKIT_LOG_BEFORE"
ENV_COLLECT_PID = "XLA_BUGKIT_COLLECT_PID"
# The module whose first call's outputs the run keeps, with Pallas's TPU interpret mode
# forced on every process (``pallas_interpret``): a Pallas kernel's reference.
ENV_PALLAS_INTERPRET = "XLA_BUGKIT_PALLAS_INTERPRET"
# ... compiled for these parameter types (its ``compile`` record's ``shapes``), where known.
ENV_PALLAS_SHAPES = "XLA_BUGKIT_PALLAS_SHAPES"

# A traceback frame of the hook's own wrappers (wherever xla-bugkit is installed), with the
# source and caret lines Python prints under it.
_OWN_FRAME = re.compile(
    r'^( *)File "[^"\n]*[/\\]xla_bugkit[/\\]run[/\\]hook[/\\][^"\n]*", line \d+, in [^\n]*\n'
    r"(?:\1 [^\n]*\n)*",
    re.M,
)
OWN_FRAME = "[a frame of xla-bugkit's capture hook, which passes the call on, left out]"


def without_own_frames(text: str) -> str:
    """``text`` with each traceback frame of the hook's wrappers (``jax_patches``) said in one
    line: it is not where the failure comes from, and it names where xla-bugkit is installed."""
    return _OWN_FRAME.sub(lambda m: f"{m.group(1)}{OWN_FRAME}\n", text)


def environment(
    base: Mapping[str, str],
    processes: Path,
    dump_dir: Path,
    first_arguments: bool = False,
    budget: int | None = None,
    xla_flags: str | None = None,
) -> dict[str, str]:
    """``base`` with the hook on ``PYTHONPATH`` (first, so it shadows any other
    ``sitecustomize``, which the hook then runs itself) and told where to write;
    ``first_arguments``: it saves each compiled function's first arguments (XLA writes no
    snapshots); ``budget``: the bytes of arguments each process may keep; ``xla_flags``:
    collect's XLA flags, which the hook keeps in XLA_FLAGS until XLA reads it."""
    env = dict(base)
    if "JAX_DUMP_IR_TO" not in base:  # the user's own jaxpr or StableHLO dumps win
        env["JAX_DUMP_IR_TO"] = str(dump_dir / JAXPRS)
        env["JAX_DUMP_IR_MODES"] = "jaxpr"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), base.get("PYTHONPATH")]))
    env[ENV_PROCESSES] = str(processes)
    env[ENV_DUMP_DIR] = str(dump_dir)
    if first_arguments:
        env[ENV_FIRST_ARGUMENTS] = "1"
    if budget is not None:
        env[ENV_ARGS_BUDGET] = str(budget)
    if xla_flags:
        env[ENV_XLA_FLAGS] = xla_flags
    return env


def process_dump_dir(dump_dir: Path, pid: int) -> Path:
    """The folder a process with a backend dumps into."""
    return dump_dir / str(pid)
