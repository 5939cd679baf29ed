"""The line that killed a process, as it printed it, and the signal its exit status names.

A crash's headline is its fatal line: a glog CHECK (XLA's, or the dated form of TensorFlow's
and PyTorch/XLA's logging), a C++ exception nobody caught, LLVM's exit on an option it does
not know, Python's fatal error. A process killed without printing one says no more than its
signal. ``classify`` reads a crash from here; a CHECK's stack trace also tells it whether XLA
was compiling.
"""

from __future__ import annotations

import re
import signal

from xla_bugkit.failure.peers import TERMINATED

# glog/absl fatal line: "F1202 09:49:08.829582  1892 buffer_assignment_util.cc:46] Check failed: .."
# or the dated form of TensorFlow's and PyTorch/XLA's logging:
# "2026-12-02 17:51:18.336598: F external/xla/xla/map_util.h:50] Check failed: ...". A build
# with Bazel modules names XLA's folder "external/xla+/" (Bazel 7: "external/xla~/").
_CHECK_RE = re.compile(
    r"^(?:F\d{4} [\d:.]+\s+\d+|\d{4}-\d\d-\d\d [\d:.]+: F) (?P<site>[\w./+~-]+:\d+)\] (?P<msg>.*)$",
    re.M,
)
_TERMINATE_RE = re.compile(
    r"^terminate called after throwing an instance of '(?P<what>[^']+)'", re.M
)
_LLVM_OPTION_RE = re.compile(r"^xla: (?P<msg>Unknown command line argument [^\n]*)$", re.M)
_FATAL_PY_RE = re.compile(r"^Fatal Python error: (?P<msg>[^\n]*)$", re.M)
# faulthandler's words for the fatal signals: a line that says no more than the exit status.
_SIGNAL_ONLY = re.compile(
    r"Fatal Python error: (?:Aborted|Segmentation fault|Bus error|Floating point exception|"
    r"Illegal instruction)$"
)
# Frames in a fatal error's stack trace that only appear while compiling.
_COMPILE_FRAMES = re.compile(r"Compiler::|CompileAndLoad|::Compile\w*\(|RunHloPasses|RunBackend")


def first_fatal(output: str) -> tuple[str, str | None] | None:
    """The line that killed the process: a CHECK, an uncaught C++ exception, LLVM's exit. A
    CHECK of its own counts before the JAX distributed service's end of it: the service may
    end a process (another one had died) a moment before the compile it was in aborts."""
    checks = list(_CHECK_RE.finditer(output))
    own = [m for m in checks if TERMINATED not in m.group("msg")]
    m = own[0] if own else checks[0] if checks else None
    if m:
        site = m.group("site").rsplit("/", 1)[-1]
        return f"{site}] {m.group('msg')}", site
    m = _TERMINATE_RE.search(output)
    if m:
        what = _first_line_after(output, m.end(), prefix="  what():")
        return f"terminate called after throwing an instance of '{m.group('what')}'{what}", None
    m = _LLVM_OPTION_RE.search(output)
    if m:
        return f"xla: {m.group('msg')}", None
    m = _FATAL_PY_RE.search(output)
    if m:
        return f"Fatal Python error: {m.group('msg')}", None
    return None


def _first_line_after(output: str, pos: int, *, prefix: str) -> str:
    rest = output[pos:].lstrip("\n").split("\n", 1)[0]
    return f" ({rest.strip()})" if rest.startswith(prefix) else ""


def says_only_signal(line: str) -> bool:
    """Whether a fatal ``line`` names the signal and not what raised it (faulthandler's
    ``Fatal Python error: Aborted``)."""
    return _SIGNAL_ONLY.match(line) is not None


def python_fatal_at(output: str) -> int | None:
    """Where the line of Python's fatal error starts in ``output``; None without one."""
    found = _FATAL_PY_RE.search(output)
    return None if found is None else output.rfind("\n", 0, found.start()) + 1


def fatal_in_compile(output: str) -> bool:
    """Whether the fatal line came while XLA compiled: a CHECK whose stack trace holds a
    compiler's frames, or LLVM's exit on an option it does not know."""
    fatal_at = _CHECK_RE.search(output)
    if fatal_at and _COMPILE_FRAMES.search(output, fatal_at.end()):
        return True
    return _LLVM_OPTION_RE.search(output) is not None


def signal_name(exit_status: int | None) -> str | None:
    """The signal a return code says killed the process (``SIGABRT``); None for an exit."""
    if exit_status is None:
        return None
    # A shell reports a child's death by signal N as exit status 128 + N.
    shell_signal = 128 < exit_status <= 128 + 64  # 255 is exit(-1), not a signal
    number = -exit_status if exit_status < 0 else exit_status - 128 if shell_signal else 0
    if number <= 0:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
