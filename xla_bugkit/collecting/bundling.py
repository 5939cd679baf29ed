"""The stages after the run, in order: find the failing process, index its dumps, choose
(for a wrong result, by replaying candidates), replay, write the bundle.

``driver`` imports this module while the program runs (``warm``): it holds what the run
itself never needs.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from xla_bugkit import frameworks
from xla_bugkit.bundle import excused, trackers, triage
from xla_bugkit.choose import allocation, dumps
from xla_bugkit.choose.selection import Selection
from xla_bugkit.choose.snapshot import replay_note
from xla_bugkit.collecting import interpret, no_dumps, own_flags, workdir
from xla_bugkit.collecting.options import CollectOptions, CollectResult, Dumps, Findings
from xla_bugkit.collecting.replays import Replaying, Replays
from xla_bugkit.collecting.stages import (
    choose,
    exit_code,
    index_dumps,
    replay_modules,
    search_wrong_value,
    write_bundle,
    write_recorded_inputs,
)
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.replay import differential
from xla_bugkit.run import evidence_files, processes
from xla_bugkit.run.evidence import ProcessEvidence
from xla_bugkit.run.record import RunRecord
from xla_bugkit.run.weigh import weigh
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict


def after_run(
    work: Path, run: RunRecord, options: CollectOptions, fmt: str, ui: Ui
) -> CollectResult:
    if not run.failure.kind.is_failure and not options.always and not _holds_shards(work, options):
        return CollectResult(ExitCode.NO_FAILURE, run, Selection(chosen=(), guess=False), fmt=fmt)
    return bundle_from(work, run, options, fmt, ui, may_run=True)


def _holds_shards(work: Path, options: CollectOptions) -> bool:
    """A part of a job whose process saved its shards of a call over several processes'
    devices writes its part even where its program succeeded: merge needs every part's
    shards to put the job's inputs together, and the process that failed holds only its own."""
    if options.job_part is None:
        return False
    saved = evidence_files.load(work)
    return any(e.shards is not None for p in saved for e in p.events)


def bundle_from(
    work: Path, run: RunRecord, options: CollectOptions, fmt: str, ui: Ui, *, may_run: bool = False
) -> CollectResult:
    """The stages after the run: index, choose (for a wrong result, by replaying candidates:
    ``search_wrong_value``), replay, write the bundle. ``may_run``: the program may run
    again, under Pallas's interpret mode, for a kernel's reference (``interpret``); a bundle
    made again from a kept work dir (``rebundle``) reads what its run recorded instead."""
    run = with_culprit(work, run, ui)
    # Worked out once the failure is weighed: every replay below runs under it.
    replaying = Replaying.of_run(run, options)
    # The failing process's own dumps (each process of a run dumps into its own folder).
    dump_dir = processes.dump_folder(work / workdir.DUMP, run.culprit)
    stage_dir = work / workdir.STAGE
    saved, notes = write_recorded_inputs(work, dump_dir, run)
    for note in notes:
        ui.warn(note)
    with ui.phase("indexing dumps"), ui.timed("index"):
        found = index_dumps(dump_dir, run)
    for problem in found.problems:
        ui.warn(f"{problem}: free disk space or raise the file-size limit, then run again")
    if not found.index.modules:
        return no_dumps.without_dumps(run, saved, fmt)
    with ui.timed("select"):
        # Module ids are per process: only the failing process's records describe its dumps.
        selection = choose(found.index, run, options, run.culprit_evidence)
    short = allocation.over_device_memory(run.failure.headline) or (
        excused.run_time_shortfall(run.failure, run.output)
    )
    if short is not None and selection.chosen:
        buffers = allocation.device_report(found.index, selection.chosen[0].module)
        run = replace(run, largest_buffers=tuple(buffers))
    # The replays' outputs and references: the bundle's expected.npz and wrong values.
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-arrays-") as kept:
        arrays = Path(kept)
        search = search_wrong_value(dump_dir, found.index, run, options, replaying, ui, arrays)
        if search is not None:
            selection = differential.merged(selection, search, limit=options.limit)
            found = Dumps(
                found.index, (*found.problems, search.note) if search.note else found.problems
            )
        replaying = replaying.of_modules(run, (c.module.name for c in selection.chosen))
        # A module whose newest inputs already hold a NaN replays where it was made.
        chosen = (c.module for c in selection.chosen)
        if options.data and (earlier := replay_note(dump_dir, chosen)):
            found = Dumps(found.index, (*found.problems, earlier))
        replaying, known = _ahead_of_replays(
            work, run, found.index, search, selection, options, replaying, ui, may_run=may_run
        )
        # A process the job took down after another failed: its modules ran fine, waiting
        # for peers that are gone; a replay here proves nothing either way.
        peers_gone = run.failure.peer is not None
        if peers_gone and options.replay:
            note = "not replayed: another process of the job failed first, and its modules " \
                "waited for peers that are gone"  # fmt: skip
            ui.say(note)
            found = Dumps(found.index, (*found.problems, note))
        replays = (
            replay_modules(dump_dir, selection, run, replaying, ui, arrays=arrays, known=known)
            if options.replay and not peers_gone
            else None
        ) or Replays(())
        run = with_proven_wrong_result(
            with_replayed_message(run, replays.verdicts), replays.verdicts
        )
        found = _settled(found, search, replays.verdicts)
        if replays.interrupted:
            found = Dumps(found.index, (*found.problems, replays.note))
        run = own_flags.weigh(dump_dir, selection, run, replays, replaying, ui=ui)
        said = run.own_flags
        if said is not None:
            found = Dumps(found.index, (said, *found.problems))
        findings = Findings(found, selection, run, replays.verdicts, arrays)
        try:
            with ui.phase("writing the bundle"):
                manifest, size = write_bundle(stage_dir, findings, options, fmt, replaying, ui)
        finally:
            shutil.rmtree(stage_dir, ignore_errors=True)  # a copy of what the archive holds
    judged = triage.of_run(run, replays.verdicts, module=_first(selection))
    return CollectResult(
        exit_code(run, judged, replay_interrupted=replays.interrupted),
        run,
        selection,
        replays.verdicts,
        options.output,
        size,
        tuple(manifest["notes"]),
        manifest,
        fmt,
        replay_interrupted=replays.interrupted,
        own_flags=said,
        judged=judged,
        tracker=trackers.destination(
            frameworks.of_record(manifest.get("framework")), replays.verdicts, options.repo
        ),
    )


def _settled(
    found: Dumps, search: differential.Differential | None, verdicts: Sequence[Verdict]
) -> Dumps:
    """``found`` with the choice's note as the final ``verdicts`` leave it: the summary and
    the bundle say one thing (a kernel the search could not check, judged since by its
    interpret mode, is no longer said unchecked)."""
    if search is None or not search.note:
        return found
    settled = search.note_after(verdicts)
    problems = (settled if p == search.note else p for p in found.problems)
    return Dumps(found.index, tuple(p for p in problems if p))


def _first(selection: Selection) -> str | None:
    """The name of the module chosen first, which the triage names."""
    return selection.chosen[0].module.name if selection.chosen else None


def _ahead_of_replays(
    work: Path,
    run: RunRecord,
    index: dumps.DumpIndex,
    search: differential.Differential | None,
    selection: Selection,
    options: CollectOptions,
    replaying: Replaying,
    ui: Ui,
    *,
    may_run: bool,
) -> tuple[Replaying, dict[str, Verdict]]:
    """What the replay stage takes from before it: the verdicts the search already has
    (``known``: it replayed on the real inputs; --no-data replays on generated ones), and a
    Pallas kernel's reference, the program's outputs under the interpret mode
    (``interpret``), by which the kernel's replay runs again, whatever the search saw."""
    known = differential.known_verdicts(search if options.data else None, selection.chosen)
    if not options.replay or not options.data or run.failure.peer is not None:
        return replaying, known
    by_label = interpret.reference(work, run, index, selection.chosen, options, ui, may_run=may_run)
    known = {label: v for label, v in known.items() if label not in by_label}
    return replace(replaying, interpreted=by_label), known


def with_culprit(work: Path, run: RunRecord, ui: Ui) -> RunRecord:
    """``run`` with the process its failure belongs to, chosen from what each process of
    the run recorded (``processes.failing``); dumps it sent elsewhere are gathered first."""
    named = _planned_allocation(run.failure, run.output)
    culprit = run.culprit
    recorded: tuple[ProcessEvidence, ...] = ()
    if culprit is None or named is not None:  # the run chose without the dumps' evidence
        recorded = evidence_files.load(work)
        culprit = processes.failing(recorded, named) or culprit
    run = replace(run, versions=processes.program_versions(culprit, recorded))
    if culprit is None:
        return run
    if culprit.others:
        ui.say(f"the failure is in {culprit.label}: {culprit.why}")
    folder = processes.dump_folder(work / workdir.DUMP, culprit)
    for note in processes.gather_elsewhere(culprit.process, folder):
        ui.say(note)
    weighed = weigh(run.failure, culprit)
    if weighed != run.failure:
        ui.say(f"the failure, from the process's own record: {weighed.describe}")
    return replace(run, culprit=culprit, failure=weighed)


def _planned_allocation(
    failure: Failure, output: str
) -> Callable[[ProcessEvidence], str | None] | None:
    """For an allocation XLA could not make: of a process, that its dumps plan exactly that
    allocation. An error a worker raises reaches its parent's output (a process pool raises
    it again there), and the worker ends normally: its dumps say whose it was."""
    size = allocation.failed_allocation(output)
    if size is None or not KINDS[failure.kind].out_of_memory_running:
        return None

    def named(p: ProcessEvidence) -> str | None:
        if p.dump_dir is None or not p.dump_dir.is_dir():
            return None
        found = allocation.modules_allocating(dumps.index(p.dump_dir), size)
        return (
            f"{found[0][0].label} in its dumps plans the {size:,} bytes XLA could not allocate"
            if found
            else None
        )

    return named


def with_replayed_message(run: RunRecord, verdicts: Sequence[Verdict]) -> RunRecord:
    """``run``, whose failing process died without its message reaching the output, with
    the message of the first replay that died the same way (the bundle's headline and
    title then name the CHECK, and say where it came from)."""
    if not run.failure.message_lost:
        return run
    proof = next((v for v in verdicts if v.reproduced and v.failure is not None), None)
    if proof is None or proof.failure is None:
        return run
    return replace(run, failure=run.failure.with_message_of(proof.failure, proof.module))


def with_proven_wrong_result(run: RunRecord, verdicts: Sequence[Verdict]) -> RunRecord:
    """``run``, which ended by the program's own doing (its own alarm and exit status, in
    words no check of ours reads as a wrong value), as the wrong result a replay proved: the
    module's output differs from its reference. The program's message stays the headline."""
    f = run.failure
    # An exception of the program's (a ValueError it raised) is its own failure, proven or not.
    if f.kind is not Kind.EXIT or f.exception or f.callback is not None or f.peer is not None:
        return run
    proof = next((v for v in verdicts if v.outcome is Outcome.REPRODUCED_WRONG), None)
    if proof is None:
        return run
    rests_on = (
        f"the program's own check failed ({f.headline[:120]}), and the replay of "
        f"{proof.module} proved a wrong result: {proof.evidence[:160]}"
    )
    return replace(run, failure=replace(f, kind=Kind.WRONG_RESULT, evidence=f.evidence or rests_on))
