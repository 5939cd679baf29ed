"""One rerun of the user's command as it is kept (``RunRecord``): what ran, how it ended,
where its output is, and what the failing process's own records say of it (the flags it ran
with, its compile options, its interpreter, its limits)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit.failure import xla_log
from xla_bugkit.hlo import flags
from xla_bugkit.run import evidence, hook

if TYPE_CHECKING:
    from xla_bugkit.failure.classify import Failure
    from xla_bugkit.run.processes import Culprit

# What reads the run once it has ended (classify, processes) is imported then: the program
# starts without waiting for it (``rerun``).


@dataclass(frozen=True)
class RunRecord:
    """One rerun of the user's command: what ran, how it ended, where its output is."""

    command: tuple[str, ...]
    exit_status: int | None
    timed_out: bool
    interrupted: bool
    duration: float
    log: Path
    output: str
    xla_flags: flags.MergedFlags
    failure: Failure
    # The process the failure belongs to, from what each process recorded (set once the
    # evidence is read: ``processes.failing``); None without the hook's records.
    culprit: Culprit | None = None
    # What a replay without the run's own XLA (or TPU) flags showed (``collecting.own_flags``), once
    # it ran: one line for the summary and the report.
    own_flags: str | None = None
    # The run's own flags that let XLA change results on purpose (fast math), when a wrong
    # value agrees with its references without them (``collecting.own_flags``).
    relaxed_by: tuple[str, ...] = ()
    # The run's own TPU compiler flags, when a compile out of a limit (scoped VMEM) compiles
    # and runs without them: the limit is theirs (``collecting.own_flags``).
    limited_by: tuple[str, ...] = ()
    # The largest buffers of the chosen module's memory-usage report, when the run failed
    # for want of device memory (``choose.allocation.largest_allocations``).
    largest_buffers: tuple[str, ...] = ()
    # The lines of ``output`` that only collect's log settings made (``re.match`` on a line):
    # the terminal hid them, and the report shows the program's output without them.
    hidden: str | None = None
    # The interpreter and the versions the program's own process recorded
    # (``processes.program_versions``), set with the culprit; empty without the hook's records.
    versions: Mapping[str, str] = field(default_factory=dict)
    # The part of a job of several machines this run was ({"part": I, "parts": N, "from":
    # "SLURM_PROCID"}: ``collecting.job``); None outside one.
    job: Mapping[str, object] | None = None
    # The TPU compiler's flags the user set (LIBTPU_INIT_ARGS, as given: collect's own Mosaic
    # dump flag is not among them); ``tpu_args_in_force`` adds what the program set itself.
    tpu_args: tuple[str, ...] = ()

    @property
    def program_output(self) -> str:
        """``output`` as the program shows it by itself: without the lines ``hidden`` (XLA's
        INFO lines when the user set no log level) nor XLA's ``Dumping`` lines, and with the
        capture hook's frames in a traceback said in one line."""
        text = hook.without_own_frames(xla_log.without_dump_lines(self.output))
        if self.hidden is None:
            return text
        hide = re.compile(self.hidden)
        return "".join(line for line in text.splitlines(keepends=True) if not hide.match(line))

    @property
    def flags_in_force(self) -> tuple[str, ...]:
        """The flags the failing process ran with (set by the program itself included, dump
        flags left out); without the hook's records, the user's XLA_FLAGS."""
        if self.culprit is not None:
            from xla_bugkit.run.processes import flags_in_force

            return flags_in_force(self.culprit.process)
        return self.xla_flags.user_flags

    @property
    def tpu_args_in_force(self) -> tuple[str, ...]:
        """The TPU compiler's flags the failing process's backend started with (set by the
        program itself included), less collect's own Mosaic dump flag and what jax adds there
        by itself (``flags.JAX_OWN_TPU_ARGS``, unless the user set it); without the hook's
        records, the user's (``tpu_args``). A replay on a TPU applies those
        ``flags.admit_tpu`` allows."""
        env = self.culprit.process.env if self.culprit is not None else {}
        if flags.TPU_ENV not in env:
            return self.tpu_args
        ours = {
            flags.mosaic_dump_flag(Path(d))
            for f in self.xla_flags.flags
            if flags.name_of(f) == "--xla_dump_to" and (d := flags.value_of(f))
        }
        ours |= flags.JAX_OWN_TPU_ARGS - set(self.tpu_args)
        return tuple(f for f in flags.tpu_args(env[flags.TPU_ENV]) if f not in ours)

    def compile_options(self, label: str) -> tuple[str, ...]:
        """The XLA options the failing process passed to its compile of the module ``label``
        (``module_0034.jit_f``; ``jax.jit(f, compiler_options=...)``), as flags; () without
        the hook's records."""
        if self.culprit is None:
            return ()
        from xla_bugkit.run.processes import compile_options

        numbered = re.match(r"module_(\d+)\.(.+)$", label)
        if numbered is None:
            return compile_options(self.culprit.process, label)
        name, module_id = numbered.group(2), int(numbered.group(1))
        return compile_options(self.culprit.process, name, module_id)

    @property
    def program_python(self) -> str | None:
        """The failing process's interpreter, when its jaxlib is not xla-bugkit's."""
        from xla_bugkit.run.processes import program_python

        return program_python(self.culprit.process) if self.culprit is not None else None

    @property
    def memory_cap(self) -> int | None:
        """The address-space limit the failing process set itself, if it did."""
        from xla_bugkit.run.processes import memory_cap

        return memory_cap(self.culprit.process) if self.culprit is not None else None

    @property
    def host_memory(self) -> int | None:
        """The RAM and swap of the machine the failing process ran XLA on, when that was
        its CPU (``processes.host_memory``)."""
        from xla_bugkit.run.processes import host_memory

        return host_memory(self.culprit.process) if self.culprit is not None else None

    @property
    def signal_elsewhere(self) -> str | None:
        """When a process the program started died on the failure's signal and the program
        itself exited: "SIGABRT in pid 4242; the program exited with status 1"."""
        from xla_bugkit.failure.fatal import signal_name  # read once the run has ended

        sig = self.failure.signal
        if not sig or self.exit_status is None or signal_name(self.exit_status) == sig:
            return None
        who = self.culprit.label if self.culprit is not None else "a process it started"
        return f"{sig} in {who}; the program exited with status {self.exit_status}"

    @property
    def went_on_from(self) -> str | None:
        """Where the failing process's XLA error was raised and left uncaught, when the run
        still exited 0 (a thread it ended, an atexit function: Python printed it and went
        on); None otherwise."""
        if self.exit_status != 0 or not self.failure.kind.is_failure or self.culprit is None:
            return None
        thrown = (u for u in reversed(self.culprit.process.uncaught) if u.from_jax)
        return next((u.where for u in thrown), None)

    @property
    def culprit_evidence(self) -> tuple[evidence.ProcessEvidence, ...]:
        return (self.culprit.process,) if self.culprit is not None else ()
