"""The run's own XLA flags as a cause: one replay without them.

A wrapper script or the program itself may set XLA flags (``--xla_disable_all_hlo_passes``,
``--xla_cpu_parallel_codegen_split_count=-1``, a pass disabled), or the TPU compiler's in
LIBTPU_INIT_ARGS (``--xla_tpu_scoped_vmem_limit_kib=4096``). When the module fails with
them and not without, that is the first thing a maintainer asks, and the user may have
caused the failure: collect says so before it points at any tracker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from xla_bugkit import platforms
from xla_bugkit.bundle import excused
from xla_bugkit.bundle.own_flags import (
    OwnFlags,
    flag_name,
    set_own,
    starts_process,
    without_flags,
)
from xla_bugkit.choose.dumps import DumpModule
from xla_bugkit.choose.selection import Selection
from xla_bugkit.collecting.replays import Replaying, Replays
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.names import module_name
from xla_bugkit.replay import ReplayInput, module_files, replay, replay_input
from xla_bugkit.run.record import RunRecord
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict


def weigh(
    root: Path,
    selection: Selection,
    run: RunRecord,
    replays: Replays,
    replaying: Replaying,
    *,
    ui: Ui,
) -> RunRecord:
    """``run`` with what its own flags showed, said first in its report (``own_flags``), and
    those that excuse the failure (``relaxed_by``, ``limited_by``): the module replayed
    without its XLA flags and without its TPU flags (not when Ctrl-C stopped the replays),
    or for a wrong value no replay reproduced, that every replay ran with them."""
    own = tpu = None
    if not replays.interrupted:
        own = probe(root, selection, run, replays.verdicts, replaying, ui=ui)
        tpu = probe_tpu(root, selection, run, replays.verdicts, replaying, ui=ui)
    said = "; ".join(o.finding() for o in (own, tpu) if o is not None)
    if not said:
        unproven = unproven_wrong_result(run, replays.verdicts)
        return run if unproven is None else replace(run, own_flags=unproven)
    return replace(
        run,
        own_flags=said,
        relaxed_by=own.relaxing if own is not None else (),
        limited_by=tpu.limiting if tpu is not None else (),
    )


def probe(
    root: Path,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    replaying: Replaying,
    *,
    ui: Ui,
) -> OwnFlags | None:
    """Replay the first module that reproduced the failure without the XLA flags that the
    run set (its XLA_FLAGS in force, less the dump flags and the device count), otherwise as
    the replay stage did (``replaying``); None when it set none, or nothing reproduced."""
    own = own_xla_flags(run)
    failing = _failing(root, selection, verdicts)
    if failing is None:
        return None
    m = failing.module
    options = run.compile_options(m.label)
    if not (own or options):
        return None
    # The module's debug options hold its compile's own options: a replay applies them.
    names = {flag_name(f) for f in (*own, *options)}

    def keeping(keep: frozenset[str]) -> Verdict:
        """The module replayed with the run's own flags and options less all but ``keep``."""
        return failing.without(run, replaying, lambda inp: _xla_flags_kept(inp, names - keep))

    with ui.phase(f"replaying {m.label} without the run's own XLA flags"):
        without = keeping(frozenset())
    alone = ""
    if not without.reproduced and 1 < len(names) <= MOST_TRIED_ALONE:
        # Which one is enough: a maintainer asks for the smallest set.
        with ui.phase(f"replaying {m.label} with each of them alone"):
            for f in (*own, *options):
                if keeping(frozenset({flag_name(f)})).reproduced:
                    alone = f
                    break
    wrong = failing.wrong
    return OwnFlags(own, without, wrong_result=wrong, options=options, module=m.name, alone=alone)


MOST_TRIED_ALONE = 4  # own flags and options, each tried alone after all of them are dropped


def probe_tpu(
    root: Path,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    replaying: Replaying,
    *,
    ui: Ui,
) -> OwnFlags | None:
    """Replay the first module that reproduced the failure without the TPU compiler's flags
    the run set (its LIBTPU_INIT_ARGS in force, those a replay applies: ``flags.admit_tpu``),
    otherwise as the replay stage did; None when it set none, the module is not a TPU's (no
    replay elsewhere applies them), or nothing reproduced."""
    own = flags.admit_tpu(run.tpu_args_in_force).flags
    failing = _failing(root, selection, verdicts) if own else None
    if failing is None:
        return None
    platform = platforms.find(failing.inp.platform)
    if platform is None or platform.compiler_env is None:
        return None
    m = failing.module
    with ui.phase(f"replaying {m.label} without the run's own TPU compiler flags"):
        # No flags at all, not the machine's own LIBTPU_INIT_ARGS: the compiler's defaults.
        without = failing.without(run, replaying, lambda inp: replace(inp, tpu_args=()))
    over = excused.over_compile_limit(run.failure)
    return OwnFlags(
        own, without, wrong_result=failing.wrong, module=m.name, tpu=True, over_limit=over
    )


class _Failing(NamedTuple):
    """The first chosen module whose replay reproduced the failure (``proof``), and its
    replay's input (``inp``), as the dumps hold it."""

    module: DumpModule
    inp: ReplayInput
    proof: Verdict

    @property
    def wrong(self) -> bool:
        """The failure reproduced is a wrong value: a replay without flags checks its result."""
        return self.proof.outcome is Outcome.REPRODUCED_WRONG

    def without(
        self, run: RunRecord, replaying: Replaying, less: Callable[[ReplayInput], ReplayInput]
    ) -> Verdict:
        """The module replayed as the replay stage did (``replaying``: the run's context and
        options), less a set of the run's own flags (``less``: the input as the run ran it,
        without them)."""
        context = replaying.context
        return replay(
            less(context.input(self.inp)),
            expected=run.failure,
            options=replace(
                replaying.options, memory_limit=context.memory_limit(self.inp), reference=self.wrong
            ),
        )


def _failing(root: Path, selection: Selection, verdicts: Sequence[Verdict]) -> _Failing | None:
    """The first chosen module whose replay reproduced the failure; None when none
    reproduced, or it cannot be replayed."""
    proof = next((v for v in verdicts if v.reproduced), None)
    chosen = next((c for c in selection.chosen if proof and c.module.label == proof.module), None)
    if proof is None or chosen is None:
        return None
    m = chosen.module
    inp = replay_input(m.label, module_files(root, m), m.platform)
    return _Failing(m, inp, proof) if inp is not None else None


def _xla_flags_kept(as_run: ReplayInput, drop: set[str]) -> ReplayInput:
    """``as_run`` (the module as the run ran it) less the XLA flags named in ``drop``: a
    boolean one set back to its default outright (``own_flags.without_flags``)."""
    return replace(as_run, xla_flags=without_flags(as_run.xla_flags, drop), flags_given=True)


def unproven_wrong_result(run: RunRecord, verdicts: Sequence[Verdict]) -> str | None:
    """For a wrong value no replay reproduced, the run's own XLA flags, said first: flags
    such as fast math change results on purpose, and the replay ran with them, so it could
    not tell them apart from XLA's doing. None when the run set none, or it is no such case."""
    from xla_bugkit.failure.classify import Kind

    own = _compiler_flags(run)
    module = module_name(verdicts[0].module) if verdicts else ""
    options = run.compile_options(verdicts[0].module) if verdicts else ()
    if not (own or options) or not verdicts or run.failure.kind is not Kind.WRONG_RESULT:
        return None
    if any(v.reproduced for v in verdicts):
        return None  # ``probe`` replays without them
    return (
        f"{set_own(own, options, module)}, and every replay ran with them: "
        "check that they are meant before reporting a wrong value (some flags, such as fast "
        "math, change results on purpose)"
    )


def own_xla_flags(run: RunRecord) -> tuple[str, ...]:
    """The XLA flags the run set itself: those in force, less the dump flags. The device
    count is one of them: dropped, a replay gives the module only the devices it is
    partitioned for (``DEVICES_SAID``)."""
    return run.flags_in_force


def _compiler_flags(run: RunRecord) -> tuple[str, ...]:
    """``own_xla_flags`` less the device count, which changes no result XLA computes."""
    return tuple(f for f in own_xla_flags(run) if not starts_process(f))
