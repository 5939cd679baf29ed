"""Replay modules straight from an XLA dump folder: ``run_hlo_module`` without Bazel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from xla_bugkit import config, frameworks
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.failure.kinds import KINDS, Shows
from xla_bugkit.hlo import flags
from xla_bugkit.replay import extreme, judge, native
from xla_bugkit.replay.context import RunContext, replay_module
from xla_bugkit.replay.inputs import ReplayInput, dump_modules, module_files, replay_input
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance

# A dump records no outcome. A module that agrees with its references on generated inputs
# is tried on extreme values too, as verify tries one whose run ended in a wrong result:
# many wrong results show only on those.
SUSPECTED = Failure(
    Kind.WRONG_RESULT, Phase.RUN, "a wrong result (suspected)", "a wrong result (suspected)"
)


def replay_dump(
    target: Path,
    *,
    module_re: str | None = None,
    snapshot: Path | None = None,
    platform: str | None = None,
    xla_flags: str = "",
    timeout: float = config.REPLAY_TIMEOUT,
    ui: Ui | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    fake_data: bool = False,
) -> list[Verdict]:
    """Replay every module ``target`` names (a dump folder or one dump file).

    ``xla_flags`` replace the recorded flags (the dumped debug options, and those recorded
    in the PJRT folder's compile_options.pb); ``snapshot`` gives the inputs; ``platform``
    replaces the one the dump was written on. A module with
    neither a before-optimizations proto nor its text is skipped with a warning on ``ui``;
    a ``BugkitError`` says when that leaves nothing to replay.
    """
    ui = ui or Ui()
    verdicts = []
    found = dump_modules(target, module_re)
    # A dump holds no record of its run but the module names, which tell a PyTorch/XLA dump:
    # its modules replay under torch_xla's own XLA first, where it is here, as verify's do.
    names = (m.name for _, m in found)
    context = RunContext(
        framework=frameworks.from_module_names(names), tolerance=tolerance, fake_data=fake_data
    )
    if note := native.fallback_note(context.framework):
        ui.say(note)
    for root, module in found:
        files = module_files(root, module)
        if snapshot is not None:
            files["snapshot"] = snapshot
        inp = replay_input(module.label, files, platform or module.platform)
        if inp is None:
            ui.warn(
                f"{module.label}: no before_optimizations.hlo.pb or .txt "
                "(dump with --xla_dump_hlo_as_proto)"
            )
            continue
        if xla_flags:
            inp = replace(inp, xla_flags=tuple(flags.split(xla_flags)), flags_given=True)
        with ui.phase(f"replaying {module.label}"):
            # A dump may come from anyone: the same limits as verify's.
            verdict = replay_module(
                inp, expected=None, context=context, options=ReplayOptions(timeout=timeout)
            )
            verdicts.append(as_found(_on_extremes(inp, verdict, context, timeout)))
    if not verdicts:
        raise BugkitError(f"nothing in {target} can be replayed: no before-optimizations module")
    return verdicts


def _on_extremes(
    inp: ReplayInput, verdict: Verdict, context: RunContext, timeout: float
) -> Verdict:
    """``verdict``, or the replay on the first extreme set that shows a wrong result."""
    inp = context.input(inp)
    return extreme.retry(
        verdict,
        SUSPECTED,
        lambda name: judge.replay(
            inp,
            expected=SUSPECTED,
            options=ReplayOptions(
                timeout=timeout, memory_limit=context.memory_limit(inp), extreme_set=name
            ),
        ),
    )


def as_found(v: Verdict) -> Verdict:
    """``v``, with a failure the replay met as what it reproduced.

    A dump records no outcome to reproduce, so the judge, told to expect none, calls a
    module that crashes "not reproduced". What a dump's replay finds is the failure itself:
    its verdict says so, and every view of it (text, JSON, the exit code) reads that.
    """
    if v.outcome is not Outcome.NOT_REPRODUCED or v.failure is None:
        return v
    shows = KINDS[v.failure.kind].replay_shows
    if shows is Shows.NOTHING:
        return v
    return replace(v, outcome=FOUND[shows], evidence=v.failure.describe)


# What a replay shows -> the outcome that names it. A kind whose replay shows nothing of the
# module (a non-XLA exit: the replay's own code failed; an interruption, a success) is left
# as judged.
FOUND = {
    Shows.CRASH: Outcome.REPRODUCED_CRASH,
    Shows.ERROR: Outcome.REPRODUCED_ERROR,
    Shows.HANG: Outcome.REPRODUCED_HANG,
    Shows.WRONG_RESULT: Outcome.REPRODUCED_WRONG,
}


def failed(v: Verdict) -> bool:
    """The module crashed, errored, hung or computed a wrong result: ``as_found``'s verdict
    says it reproduced."""
    return v.reproduced
