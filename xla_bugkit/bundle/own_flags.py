"""The run's own XLA flags, and what a replay of its failing module without them showed: a
finding said first in its report, and the flags that excuse the failure (``excused``) when
the module is right without them. ``collect`` replays without them (``collecting.own_flags``),
and so does ``merge`` for a module it replays on its stitched inputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xla_bugkit.hlo import flags
from xla_bugkit.hlo.names import function_name
from xla_bugkit.replay import PROCESS_FLAGS
from xla_bugkit.verdict import NO_REFERENCE, Verdict

# XLA flags whose purpose is to let the compiler change floating-point results: a wrong value
# that goes away without them is what they are documented to do.
RELAXING = frozenset(
    {
        "--xla_cpu_enable_fast_math",
        "--xla_cpu_fast_math_honor_nans",
        "--xla_cpu_fast_math_honor_infs",
        "--xla_cpu_fast_math_honor_division",
        "--xla_cpu_fast_math_honor_functions",
        "--xla_cpu_enable_fast_min_max",
        "--xla_gpu_enable_fast_min_max",
    }
)


# Said after the run's own flags when the device count is one of them: a replay without it
# still has as many devices as the module is partitioned for.
DEVICES_SAID = "(a replay still gives the module the devices it is partitioned for)"


@dataclass(frozen=True)
class OwnFlags:
    """The flags the run set, and how the failing module replayed without them."""

    flags: tuple[str, ...]
    without: Verdict
    wrong_result: bool = False  # the failure is a wrong value, not a crash or an error
    options: tuple[str, ...] = ()  # the module's own compile options (``compiler_options``)
    module: str = ""  # its name, ``jit_f``
    alone: str = ""  # of several, one that fails the same way without the others
    # The flags are the run's LIBTPU_INIT_ARGS, the TPU compiler's, not its XLA_FLAGS.
    tpu: bool = False
    # The failure is a compile out of a limit (``excused.over_compile_limit``).
    over_limit: bool = False

    @property
    def needed(self) -> bool:
        """The module fails with the run's flags and not without them."""
        return not self.without.reproduced

    @property
    def relaxing(self) -> tuple[str, ...]:
        """For a wrong value that agrees with its references without them, the run's own
        flags and options when every one of them lets XLA change results on purpose (fast
        math, NaNs or infinities not honoured: ``RELAXING``); () otherwise."""
        every = tuple(f for f in (*self.flags, *self.options) if not starts_process(f))
        agreed = self.without.numbers.get("reference") not in (None, NO_REFERENCE)
        if not (self.needed and self.wrong_result and agreed and self.without.failure is None):
            return ()
        return every if all(flags.name_of(f) in RELAXING for f in every) else ()

    @property
    def limiting(self) -> tuple[str, ...]:
        """For a compile out of a limit that compiles and runs without them, the run's own
        TPU flags: the limit is one they set (``excused``); () otherwise."""
        ran = self.needed and self.without.failure is None and not self.wrong_result
        return self.flags if self.tpu and self.over_limit and ran else ()

    def finding(self) -> str:
        """One line for the summary and the report."""
        named = (
            f"this run set its own TPU compiler flags ({flags.TPU_ENV} {' '.join(self.flags)})"
            if self.tpu
            else set_own(self.flags, self.options, self.module)
        )
        devices = any(starts_process(f) for f in self.flags)
        them = f"them {DEVICES_SAID}" if devices else "them"
        if not self.needed:
            return f"{named}; it fails without {them} too"
        failed = self.without.failure
        agreed = self.without.numbers.get("reference")
        if failed is not None:
            without = f"the module fails otherwise ({failed.describe[:160]})"
        elif self.wrong_result and agreed not in (None, NO_REFERENCE):
            without = f"its result agrees with its references ({agreed})"
        else:
            without = "the module compiles and runs"
        if self.limiting:
            then = "raise the limit they set or drop them (the compile ran past it)"
        elif self.wrong_result:
            then = (
                "check that they are meant before reporting it (some flags, such as fast "
                "math, change results on purpose)"
            )
        else:
            then = "say so in the report (a crash or an error is XLA's bug under any flags)"
        if self.alone:
            without += f", and with {self.alone} alone it fails the same way"
        return f"{named}; without {them} {without}: {then}"


def set_own(run_flags: Sequence[str], options: Sequence[str], module: str) -> str:
    """Who set which of them: the run (its XLA_FLAGS in force), the program's compile of
    ``module`` (``jax.jit(f, compiler_options=...)``, which XLA_FLAGS never shows), or both.
    Its own, not "non-default": a flag may spell XLA's default value."""
    fun = function_name(module) if module else "the module"
    compiled = f"compiler_options: {' '.join(options)}"
    if not options:
        return f"this run set its own XLA flags ({' '.join(run_flags)})"
    if not run_flags:
        return f"the program compiled {fun} with XLA options of its own ({compiled})"
    return (
        f"this run set its own XLA flags ({' '.join(run_flags)}) and compiled {fun} with "
        f"options of its own ({compiled})"
    )


def kept_flags(recorded: Sequence[str], drop: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The flags a replay of the module as it ran applies (``flags.admit``: never one that
    makes XLA read or write a file, such as a cache of the user's), less those named in
    ``drop`` (canonical names, ``--xla_foo``)."""
    return tuple(f for f in flags.admit(recorded).flags if flag_name(f) not in drop)


def without_flags(recorded: Sequence[str], drop: set[str] | frozenset[str]) -> tuple[str, ...]:
    """``kept_flags``, and each dropped flag that the module's debug options hold as a
    boolean set back to its default, said outright (``--xla_foo=false``). The debug options
    list only what differs from XLA's defaults, so a boolean there is the opposite of its
    default. Said outright, it holds where the process's own XLA_FLAGS still set it (a
    replay made in the program's process, whose flags are the run's)."""
    resets = []
    for f in flags.admit(recorded).flags:
        value = (flags.value_of(f) or "").lower()
        if flag_name(f) in drop and value in ("true", "false"):
            resets.append(f"{flag_name(f)}={'false' if value == 'true' else 'true'}")
    return (*kept_flags(recorded, drop), *resets)


def starts_process(flag: str) -> bool:
    """Whether ``flag`` is read once, as the backend starts (the device count): it changes
    no result XLA computes."""
    return flags.name_of(flag) in PROCESS_FLAGS


def flag_name(flag: str) -> str:
    """``flag``'s name as ``flags.admit`` spells it: ``-noxla_foo`` -> ``--xla_foo``."""
    return f"--{flags.canonical(flag)[0]}"


def is_finding(note: str) -> bool:
    """Whether a bundle's note is a run's own-flags finding (``OwnFlags.finding``, or
    collect's word that every replay ran with them): each begins as ``set_own`` says who set
    them."""
    return note.startswith(FINDING_STARTS)


FINDING_STARTS = (
    "this run set its own XLA flags (",
    "this run set its own TPU compiler flags (",
    "the program compiled ",
)
