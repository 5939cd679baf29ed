"""The kinds of failure a run can end in (``Kind``) and what each means to every stage: one
row per kind in ``KINDS``. A stage asks the row (does the process die, does it need a
reference, what does ISSUE.md say of it) instead of keeping its own list of kinds, so a new
kind is one enum member and one row, and a forgotten field is an error, not a default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Kind(StrEnum):
    """What kind of failure a run ended in. The values appear in manifests and JSON."""

    COMPILE_CRASH = "compile crash"  # the process died (abort, CHECK, signal) while compiling
    COMPILE_ERROR = "compile error"  # compilation returned an error status
    RUNTIME_ERROR = "runtime error"  # execution returned an error status
    CRASH = "process crash"  # the process died on a signal outside compilation
    HANG = "hang"  # killed after the timeout
    INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C, SIGTERM)
    # The program's own check found a wrong value (an assertion, np.testing, a NaN check, a
    # printed "mismatch"): no XLA error, so only a replay against a reference can prove XLA.
    WRONG_RESULT = "wrong result"
    EXIT = "non-XLA failure"  # non-zero exit with no sign of XLA in the output
    SUCCESS = "success"

    @property
    def is_failure(self) -> bool:
        return self is not Kind.SUCCESS


class Shows(StrEnum):
    """What a replay that reproduces a failure shows; the values are what ``repro.py``
    checks for (its ``EXPECT``)."""

    CRASH = "crash"
    ERROR = "error"
    HANG = "hang"
    WRONG_RESULT = "wrong result"
    NOTHING = ""  # nothing of the module: a replay cannot reproduce it


@dataclass(frozen=True)
class KindInfo:
    """What one kind of failure means. Every field is required: a new kind states each."""

    # The process died (an abort, a failed CHECK, a signal) instead of returning an error.
    dies: bool
    # XLA failed: it crashed the process or returned an error status. Two failures of such
    # kinds can be one bug (``Failure.same_bug``): the same bug aborts in one build and
    # returns a status in another.
    xla_failure: bool
    # The output itself shows XLA failing (its abort while compiling, its error status):
    # XLA ran, whatever else the run says.
    shows_xla: bool
    # XLA returned an error status (compiling or running).
    error_status: bool
    # The run was stopped (by collect's timeout or the user) instead of ending by itself.
    stopped: bool
    # The process died or hung with XLA perhaps at work, not on an error it returned: the
    # module whose compilation did not finish is suspect, and the process's own record of
    # what XLA was doing is evidence.
    ended_inside: bool
    # No XLA failure shows: only a replay compared with a reference can find XLA at fault.
    needs_reference: bool
    # What a replay that reproduces it shows, and what ``repro.py`` checks for.
    replay_shows: Shows
    # An allocation XLA could not make shows as this kind: at run time (the allocator's
    # error or its abort), or compiling (the TPU compiler checks the module against the
    # chip's memory before it runs).
    out_of_memory_running: bool
    out_of_memory_compiling: bool
    # A process killed from outside (SIGTERM, a wrapper's timeout) is classified so.
    killed_shows_as: bool
    # The run may have hung without reaching collect's timeout (stopped by the user, or
    # ended by the program's own watchdog): a replay that hangs proves the hang.
    may_hide_a_hang: bool
    # How strongly the kind points at XLA when choosing which part of a job to judge by:
    # XLA's own crash or error, then a wrong result, a hang, the program's own failure.
    weight: int
    # ISSUE.md's first sentence when the triage points at XLA: ``{sig}`` is " (SIGABRT)" or
    # "", ``{module}`` and ``{code}`` where it happened (" `jit(f)`", else " a module" or
    # " compiled code").
    sentence: str
    # The trackers' "expected behaviour" field.
    expected: str


_RUNS_AS_WITHOUT_XLA = "The program runs as it does without XLA."

KINDS: Mapping[Kind, KindInfo] = MappingProxyType(
    {
        Kind.COMPILE_CRASH: KindInfo(
            dies=True,
            xla_failure=True,
            shows_xla=True,
            error_status=False,
            stopped=False,
            ended_inside=True,
            needs_reference=False,
            replay_shows=Shows.CRASH,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=5,
            sentence="XLA crashes{sig} while compiling{module}.",
            expected="XLA compiles the module without aborting.",
        ),
        Kind.COMPILE_ERROR: KindInfo(
            dies=False,
            xla_failure=True,
            shows_xla=True,
            error_status=True,
            stopped=False,
            ended_inside=False,
            needs_reference=False,
            replay_shows=Shows.ERROR,
            out_of_memory_running=False,
            out_of_memory_compiling=True,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=5,
            sentence="XLA returns an error while compiling{module}.",
            expected="XLA compiles the module, or rejects it with an error about the "
            "program rather than about XLA itself.",
        ),
        Kind.RUNTIME_ERROR: KindInfo(
            dies=False,
            xla_failure=True,
            shows_xla=True,
            error_status=True,
            stopped=False,
            ended_inside=False,
            needs_reference=False,
            replay_shows=Shows.ERROR,
            out_of_memory_running=True,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=5,
            sentence="XLA returns an error while running{code}.",
            expected="The computation runs to the end, or fails with an error about the "
            "program rather than about XLA itself.",
        ),
        Kind.CRASH: KindInfo(
            dies=True,
            xla_failure=True,
            shows_xla=False,
            error_status=False,
            stopped=False,
            ended_inside=True,
            needs_reference=False,
            replay_shows=Shows.CRASH,
            out_of_memory_running=True,
            out_of_memory_compiling=False,
            killed_shows_as=True,
            may_hide_a_hang=False,
            weight=5,
            sentence="The process dies{sig} while running{code}.",
            expected="The program runs to the end without XLA crashing.",
        ),
        Kind.HANG: KindInfo(
            dies=False,
            xla_failure=False,
            shows_xla=False,
            error_status=False,
            stopped=True,
            ended_inside=True,
            needs_reference=False,
            replay_shows=Shows.HANG,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=3,
            sentence="The program hangs.",
            expected="The computation finishes.",
        ),
        Kind.INTERRUPTED: KindInfo(
            dies=False,
            xla_failure=False,
            shows_xla=False,
            error_status=False,
            stopped=True,
            ended_inside=False,
            needs_reference=False,
            replay_shows=Shows.NOTHING,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=True,
            weight=1,
            sentence="The program is stopped before it ends.",
            expected=_RUNS_AS_WITHOUT_XLA,
        ),
        Kind.WRONG_RESULT: KindInfo(
            dies=False,
            xla_failure=False,
            shows_xla=False,
            error_status=False,
            stopped=False,
            ended_inside=False,
            needs_reference=True,
            replay_shows=Shows.WRONG_RESULT,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=4,
            sentence="The program's own check finds a wrong result.",
            expected="The result equals the reference (the same module evaluated one "
            "operation at a time), which the values above show it does not.",
        ),
        Kind.EXIT: KindInfo(
            dies=False,
            xla_failure=False,
            shows_xla=False,
            error_status=False,
            stopped=False,
            ended_inside=False,
            needs_reference=True,
            replay_shows=Shows.NOTHING,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=True,
            may_hide_a_hang=True,
            weight=2,
            sentence="The program fails.",
            expected=_RUNS_AS_WITHOUT_XLA,
        ),
        Kind.SUCCESS: KindInfo(
            dies=False,
            xla_failure=False,
            shows_xla=False,
            error_status=False,
            stopped=False,
            ended_inside=False,
            needs_reference=True,
            replay_shows=Shows.NOTHING,
            out_of_memory_running=False,
            out_of_memory_compiling=False,
            killed_shows_as=False,
            may_hide_a_hang=False,
            weight=0,
            sentence="The program runs without failing.",
            expected=_RUNS_AS_WITHOUT_XLA,
        ),
    }
)
