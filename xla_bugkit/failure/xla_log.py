"""XLA's own log lines: which module it was dumping when the run went wrong.

With ``TF_CPP_VMODULE=dump=1`` XLA logs each dump file as it writes it
(``I1202 23:03:16.094134  5758 dump.cc:233] Dumping module_0044.jit__lambda.before_optimizations.txt
to DIR``; TensorFlow and PyTorch/XLA print the same message after a date). The line names the
module by number, so it tells apart modules that share a name (six ``jit__lambda``, every
``SyncTensorsGraph.8``). The last such line before XLA's first error line, or before a crash,
names the module XLA was working on.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

VMODULE = "TF_CPP_VMODULE"
MIN_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
# dump.cc logs each file at verbosity 1.
WANTED_VMODULE: Mapping[str, int] = {"dump": 1}
_JAX_DEFAULT_LEVEL = "1"  # what ``import jax`` sets when no level is set

_DUMPING = re.compile(
    r"Dumping (?:\d+\.)?module_(?P<id>\d+)\.(?P<rest>\S+) to (?P<dir>[^\n]*)$", re.M
)
# What every such line holds, for the filters below.
_DUMPING_WORDS = r"Dumping (?:\d+\.)?module_\d+\."
# glog/absl ("E1202 23:03:16.202233  5727 cpu_client.cc:1923] ...") and TensorFlow's dated
# form ("2026-12-02 17:51:18.336598: F external/xla/xla/map_util.h:50] ...").
_ERROR_LINE = re.compile(
    r"^(?:(?P<sev>[EF])\d{4} [\d:.]+\s+\d+ |[\d-]+ [\d:.]+: (?P<tfsev>[EF]) )"
    r"(?P<site>[\w./-]+:\d+)\] (?P<msg>[^\n]*)$",
    re.M,
)
# Error lines that say nothing about the failure: slow-compile alarms, and the CUDA plugin
# registrations every GPU process logs at start.
_BENIGN = re.compile(r"slow_operation_alarm|Unable to register cu\w+ factory|cuda_(?:dnn|fft|blas)")


@dataclass(frozen=True)
class DumpLine:
    """One ``Dumping ...`` line: the module's number, the file's name after it, where."""

    id: int
    rest: str  # "jit__lambda.before_optimizations.txt"
    offset: int  # where the line is in the output

    @property
    def stage(self) -> str:
        """``compile`` (XLA started on the module), ``compiled`` (its optimised files exist),
        ``snapshot`` (an execution started) or ``backend`` (code generation, in between)."""
        if "snapshot" in self.rest:
            return "snapshot"
        if "after_optimizations" in self.rest:
            return "compiled"
        if "before_optimizations" in self.rest or self.rest.endswith("debug_options"):
            return "compile"
        return "backend"

    @property
    def file(self) -> str:
        return f"module_{self.id:04d}.{self.rest}"


@dataclass(frozen=True)
class ErrorLine:
    fatal: bool  # an F line: XLA aborts the process after it
    site: str  # "cpu_client.cc:1923"
    message: str
    offset: int


def log_env(base: Mapping[str, str]) -> dict[str, str]:
    """The log settings that make XLA name each dump file it writes, merged with ``base``'s.

    The user's own ``TF_CPP_MIN_LOG_LEVEL`` is kept: they may silence INFO on purpose; then
    the ``Dumping`` lines are missing and selection uses the other evidence.
    """
    env = {VMODULE: merge_vmodule(base.get(VMODULE), WANTED_VMODULE)}
    # jaxlib shows INFO only at level 0; PyTorch/XLA sets 1 itself unless told.
    env[MIN_LOG_LEVEL] = base.get(MIN_LOG_LEVEL, "0")
    return env


# The terminal leaves out what these settings made XLA print; run.log keeps everything.
# The start of a line XLA logs at INFO or WARNING ("I1206 09:03:43.455885 ..."): it says how
# things went, never how the program failed.
INFO_OR_WARNING = r"[IW]\d{4} \d\d:\d\d:\d\d"
# A line Python's logging wrote below ERROR, in the formats programs give it: the level is a
# word of its own before the message ("INFO:jax._src.xla_bridge:Unable to initialize backend
# 'tpu': INTERNAL: Failed to open libtpu.so: ...", as every CPU-only process logs once it calls
# logging.basicConfig(level=logging.INFO); "2026-12-06 15:37:07,153 - jax._src.xla_bridge -
# INFO - ...", "[...][jax][WARNING] ...", "... | INFO     | mod:fn:12 - ..."). Used as a
# prefix: what follows the level is the message.
PY_LOGGED_BELOW_ERROR = r"(?:[^\n]*?[\[\s|:-])?(?:DEBUG|INFO|WARNING|WARN)[\]\s|:-]"
_INFO_LINE = rb"I\d{4} [\d:.]+\s+\d+ [\w./-]+:\d+\] "
_DUMPING_BYTES = rf"[^\n]*\] {_DUMPING_WORDS}".encode()


def hidden_on_terminal(
    base: Mapping[str, str], all_info: bool, also: bytes | None = None
) -> re.Pattern[bytes] | None:
    """The lines of output that exist only because of ``log_env``: all of XLA's INFO lines
    when the user set no log level and the framework shows none by itself (``all_info``:
    JAX), else the ``Dumping`` lines unless the user asked for them; and the lines ``also``
    matches (what a framework's own settings add). None: hide nothing."""
    users = merge_vmodule(base.get(VMODULE), {})
    if all_info and MIN_LOG_LEVEL not in base:
        ours: bytes | None = _INFO_LINE
    elif any(e.partition("=")[0].strip() == "dump" for e in users.split(",")):
        ours = None
    else:
        ours = _DUMPING_BYTES
    parts = [p for p in (ours, also) if p]
    return re.compile(b"|".join(b"(?:%s)" % p for p in parts)) if parts else None


def users_level(env: Mapping[str, str]) -> str | None:
    """The ``TF_CPP_MIN_LOG_LEVEL`` the user chose, if any, in the environment of this
    process. ``import jax`` sets 1 when none is set, so in a process that imported jax (a
    notebook kernel) a 1 is taken for jax's, not the user's."""
    level = env.get(MIN_LOG_LEVEL)
    return None if level == _JAX_DEFAULT_LEVEL and "jax" in sys.modules else level


def merge_vmodule(user: str | None, wanted: Mapping[str, int]) -> str:
    """``user``'s ``module=level`` list with ``wanted`` added; the higher level of a module
    wins, and the user's order and unparseable entries are kept as they were."""
    entries: list[str] = []
    levels: dict[str, int] = {}
    for entry in (user or "").split(","):
        name, sep, level = entry.strip().partition("=")
        if not entry.strip():
            continue
        if sep and name and level.strip().lstrip("-").isdigit():
            if name not in levels:
                entries.append(name)
            levels[name] = int(level)
        else:
            entries.append(entry.strip())
    for module, wanted_level in wanted.items():
        if module not in levels:
            entries.append(module)
        levels[module] = max(wanted_level, levels.get(module, wanted_level))
    return ",".join(f"{e}={levels[e]}" if e in levels else e for e in entries)


# XLA's "Dumping ..." lines, and its one line saying a dump is on ("dump.cc:485] HloModule
# dump enabled with path prefix: ..."): both are collect's doing.
_DUMPING_LINE = re.compile(
    rf"^[^\n]*(?:{_DUMPING_WORDS}|dump\.cc:\d+\] HloModule dump enabled)[^\n]*\n?", re.M
)


def without_dump_lines(text: str) -> str:
    """``text`` less XLA's ``Dumping`` lines (and the line saying dumps are on): they name
    what was dumped, not what failed."""
    return _DUMPING_LINE.sub("", text)


def dump_lines(output: str) -> list[DumpLine]:
    return [
        DumpLine(int(m.group("id")), m.group("rest"), m.start()) for m in _DUMPING.finditer(output)
    ]


def first_error(output: str, after: int = 0) -> ErrorLine | None:
    """XLA's first fatal line; else its first error line after ``after`` that is not known to
    be harmless."""
    errors = [
        ErrorLine(
            bool(m.group("sev") == "F" or m.group("tfsev") == "F"),
            m.group("site"),
            m.group("msg"),
            m.start(),
        )
        for m in _ERROR_LINE.finditer(output)
    ]
    fatal = next((e for e in errors if e.fatal), None)
    if fatal is not None:
        return fatal
    return next(
        (e for e in errors if e.offset > after and not _BENIGN.search(f"{e.site}] {e.message}")),
        None,
    )


def last_before(lines: Sequence[DumpLine], offset: int | None = None) -> DumpLine | None:
    """The last dump line before ``offset`` (the whole output when None)."""
    before = [line for line in lines if offset is None or line.offset < offset]
    return before[-1] if before else None


def compile_finished(lines: Sequence[DumpLine], module_id: int) -> bool:
    """Whether XLA logged an optimised file of ``module_id``: its compilation got through."""
    return any(line.id == module_id and line.stage == "compiled" for line in lines)
