"""collect's stages after the run, each a function of its own (for benchmarks and for
programs that want one step): index the dumps, choose, replay, write the bundle."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from xla_bugkit import archive, config
from xla_bugkit.bundle import build, envinfo, layout
from xla_bugkit.bundle.manifest import Manifest
from xla_bugkit.bundle.triage import Triage
from xla_bugkit.choose import dumps
from xla_bugkit.choose.selection import Selection, select
from xla_bugkit.collecting.options import CollectOptions, Dumps, Findings
from xla_bugkit.collecting.replays import Replaying, Replays, replay_stage
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.failure.classify import Kind
from xla_bugkit.redact import Redactor, command_note
from xla_bugkit.replay import Spares, differential, fallback_note
from xla_bugkit.run import arguments, evidence, evidence_files, shards
from xla_bugkit.run.record import RunRecord
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Verdict


def write_recorded_inputs(
    work: Path, dump_dir: Path, run: RunRecord
) -> tuple[Sequence[evidence.ProcessEvidence], list[str]]:
    """The processes' records the run's inputs come from, and a note for each input of
    theirs that cannot serve: each set of arguments and each process's shards the hook saved
    is written into ``dump_dir`` as its module's snapshot or shards file (one already written
    is kept as it is: the replays the program makes at its main module's end write them
    first, and the stages after the run then ask for the same files). XLA writes no snapshot
    of a multi-device execution, TensorFlow none on CPU. A TensorFlow process starts no
    backend the hook sees, so without a culprit every process's records are read."""
    saved = run.culprit_evidence or evidence_files.load(work)
    notes = [*arguments.write_snapshots(dump_dir, saved), *shards.write_files(dump_dir, saved)]
    return saved, notes


def index_dumps(dump_dir: Path, run: RunRecord) -> Dumps:
    """Index the run's dumps, leaving out the files XLA said it could not write (the index
    may hold no module at all: the program may never have compiled anything)."""
    index = dumps.index(dump_dir)
    broken = dumps.failed_writes(run.output)
    problems: tuple[str, ...] = ()
    if broken:
        index = dumps.without(index, broken)
        why = ", ".join(sorted(set(broken.values())))
        problems = (f"XLA could not write {len(broken)} dump files ({why}); they are left out",)
    return Dumps(index, problems)


def choose(
    index: dumps.DumpIndex,
    run: RunRecord,
    options: CollectOptions,
    processes: Sequence[evidence.ProcessEvidence] = (),
) -> Selection:
    """The modules that matter, each with the reasons it was chosen; ``processes``: what the
    run's processes recorded about themselves (``evidence_files.load``)."""
    return select(
        index,
        run.failure,
        run.output,
        module_re=options.module_re,
        symbol=options.symbol,
        limit=options.limit,
        evidence=processes,
    )


def replay_chosen(
    root: Path, selection: Selection, run: RunRecord, options: CollectOptions, ui: Ui
) -> tuple[Verdict, ...]:
    """Replay each chosen module in a child process, judged against the run's failure."""
    replaying = Replaying.of_run(run, options).of_modules(run, _names(selection))
    return replay_modules(root, selection, run, replaying, ui).verdicts


def replay_modules(
    root: Path,
    selection: Selection,
    run: RunRecord,
    replaying: Replaying,
    ui: Ui,
    arrays: Path | None = None,
    known: Mapping[str, Verdict] | None = None,
) -> Replays:
    """``replay_chosen``, which Ctrl-C stops without stopping the bundle (``Replays``);
    ``arrays``: where each replay's arrays are kept (a subfolder per module); ``known``:
    verdicts by module label that need no replay again (the search's, already in ``arrays``)."""
    known = known or {}
    if note := fallback_note(replaying.context.framework):
        ui.warn(note)
    with ui.timed("replay"):
        replays = replay_stage(
            root,
            tuple(c for c in selection.chosen if c.module.label not in known),
            run.failure,
            replaying,
            ui=ui,
            arrays=arrays,
        )
    if not known:
        return replays
    by_label = {**known, **{v.module: v for v in replays.verdicts}}
    in_order = (by_label.get(c.module.label) for c in selection.chosen)
    return replace(replays, verdicts=tuple(v for v in in_order if v is not None))


def search_wrong_value(
    root: Path,
    index: dumps.DumpIndex,
    run: RunRecord,
    options: CollectOptions,
    replaying: Replaying,
    ui: Ui,
    arrays: Path | None = None,
    spares: Spares | None = None,
) -> differential.Differential | None:
    """For a wrong result, the modules whose replay differs from the op-by-op reference
    (``differential.search``); None when the run failed otherwise, when the replay is off,
    or when the user chose the modules (--module, --symbol). ``spares``: the children (or
    the program held at its main module's end) that replay."""
    if run.failure.kind is not Kind.WRONG_RESULT or not options.replay:
        return None
    if options.module_re is not None or options.symbol is not None:
        return None
    with ui.phase("looking for the module that computes the wrong value"):
        return differential.search(
            root,
            index,
            run.failure,
            pace=differential.Pace(options.budget),
            timeout=replaying.options.timeout,
            ui=ui,
            arrays=arrays if options.data else None,
            # The first module that differs ends it: the modules that ran after it were
            # given its wrong value and compute the right function of it.
            limit=1,
            context=replaying.context,
            spares=spares,
        )


def write_bundle(
    stage_dir: Path,
    findings: Findings,
    options: CollectOptions,
    fmt: str,
    replaying: Replaying,
    ui: Ui,
) -> tuple[Manifest, int]:
    """Write the bundle of ``findings`` in the archive format ``fmt``; while it is over
    ``max_size``, leave out the next least useful files.

    Files that cannot fit even by an optimistic estimate of their compressed size
    (``layout.cannot_fit``) are left out before anything is compressed; the exact size is
    only known after compressing, so each drop after that rewrites the archive, and leaves
    out at once the fewest next files whose sizes add up to what the archive is over.
    """
    run = findings.run
    redactor = Redactor.for_this_machine(run.command, private=(run.log.parent,))
    if note := command_note(run.command):
        found = Dumps(findings.found.index, (*findings.found.problems, note))
        findings = replace(findings, found=found)
    # The device list belongs in a bug report (jax.print_environment_info has it): one probe.
    with ui.timed("environment"):
        env = envinfo.collect_env(
            redactor, probe_devices=True, seen=seen_devices(run), program=run.versions
        )
    chosen = findings.selection.chosen
    order = layout.drop_order(layout.plan(findings.found.index, chosen, data=options.data))
    dropped: list[str] = []
    if options.max_size is not None:
        # What cannot fit however well it compresses is left out before compressing anything.
        for planned, estimate in layout.cannot_fit(order, options.max_size, fmt):
            dropped.append(planned.arcname)
            ui.say(
                f"over the size budget: leaving out {planned.arcname} "
                f"(about {estimate / 1e6:.1f} MB compressed, estimated before compressing)"
            )
    as_bundled: dict[str, Verdict | None] = {}  # by the dropped snapshot: replayed once
    while True:
        with ui.timed("stage"):
            manifest = stage_bundle(
                stage_dir,
                findings,
                options,
                redactor=redactor,
                env=env,
                dropped=dropped,
                as_bundled=_as_bundled(findings, replaying, ui, dropped, as_bundled),
            )
        with ui.timed("archive"):
            size = archive_bundle(stage_dir, options, fmt, ui)
        if options.max_size is None or size <= options.max_size:
            return manifest, size
        if len(dropped) == len(order):
            ui.warn(
                f"the bundle is {config.size_text(size)}, over --max-size "
                f"{config.size_text(options.max_size)}, with nothing left to drop (what is left "
                "is what the report needs): raise --max-size to keep what was left out"
            )
            return manifest, size
        # A file takes at most its own size in the archive: the next ones in the order go
        # together until they hold as much as the archive is over (each archive written in
        # between would still be over, and compressing a large snapshot again takes seconds).
        freed = 0
        while len(dropped) < len(order) and freed < size - options.max_size:
            planned = order[len(dropped)]
            dropped.append(planned.arcname)
            freed += planned.source.stat().st_size
            ui.say(f"over the size budget: leaving out {dropped[-1]}")


def seen_devices(run: RunRecord) -> envinfo.SeenDevices | None:
    """The failing process's devices as the hook recorded them; None when it recorded none
    (a framework other than JAX, a jax the hook does not know)."""
    p = run.culprit.process if run.culprit is not None else None
    if p is None or not p.device_list:
        return None
    count = p.devices or len(p.device_list)
    return envinfo.SeenDevices(
        platform=p.platform,
        kind=p.device_kind,
        count=count,
        local=p.local_devices or count,
        processes=p.processes or 1,
        listed=p.device_list,
        runtime=p.platform_version,
    )


def stage_bundle(
    stage_dir: Path,
    findings: Findings,
    options: CollectOptions,
    *,
    redactor: Redactor,
    env: envinfo.EnvReport,
    dropped: Sequence[str] = (),
    as_bundled: Verdict | None = None,
) -> Manifest:
    """Fill ``stage_dir`` afresh with what goes into the archive, less ``dropped``;
    ``as_bundled``: the failing module's replay on generated inputs, when ``dropped`` holds
    its snapshot."""
    shutil.rmtree(stage_dir, ignore_errors=True)
    found = findings.found
    inputs = build.BundleInputs(
        found.index,
        findings.selection,
        findings.run,
        findings.verdicts,
        redactor,
        env,
        found.problems,
        findings.arrays,
        as_bundled,
    )
    asked = build.BundleAsked(
        options.output.name,
        data=options.data,
        include_source=options.include_source,
        replayed=options.replay,
        repo=options.repo,
    )
    return build.build(stage_dir, inputs, asked, dropped=dropped)


def _names(selection: Selection) -> Iterator[str]:
    """The names of the chosen modules, which tell the framework that handed them to XLA."""
    return (c.module.name for c in selection.chosen)


def _as_bundled(
    findings: Findings,
    replaying: Replaying,
    ui: Ui,
    dropped: Sequence[str],
    done: dict[str, Verdict | None],
) -> Verdict | None:
    """When the replay that reproduced the failure ran on the run's real inputs and the size
    budget left them out: that module replayed as the bundle holds it, on generated inputs
    (once per snapshot: ``done``). Whether the bundle alone shows the failure is then known,
    not guessed. None otherwise."""
    proof = next((v for v in findings.verdicts if v.reproduced), None)
    if proof is None or proof.inputs != "snapshot":
        return None
    snapshot = next((d for d in dropped if ".snapshot." in d and f"/{proof.module}/" in d), None)
    chosen = [c for c in findings.selection.chosen if c.module.label == proof.module]
    if snapshot is None or not chosen:
        return None
    if snapshot not in done:
        ui.say(f"replaying {proof.module} on generated inputs: the bundle leaves out its real ones")
        generated = replace(replaying.options, use_data=False)
        replays = replay_stage(
            findings.found.index.root,
            chosen,
            findings.run.failure,
            replace(replaying, options=generated),
            ui=ui,
        )
        done[snapshot] = replays.verdicts[0] if replays.verdicts else None
        if (v := done[snapshot]) is not None:
            ui.say(f"{proof.module} on generated inputs: {v.outcome.value}: {v.evidence}")
    return done[snapshot]


def archive_bundle(stage_dir: Path, options: CollectOptions, fmt: str, ui: Ui) -> int:
    """Write everything under ``stage_dir`` to ``options.output`` in the archive format
    ``fmt``; return the archive's size. Within the size budget, what Deflate would pack
    little is stored (``write_archive``)."""
    files = {p.relative_to(stage_dir).as_posix(): p for p in _files(stage_dir)}
    progress = ui.progress("compressing")
    return archive.write_archive(
        files, options.output, fmt, progress=progress, room=options.max_size
    )


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def exit_code(run: RunRecord, judged: Triage, *, replay_interrupted: bool = False) -> ExitCode:
    """0 only where the triage names XLA (``Triage.proven``: a replay outside the program
    reproduced a failure that points at XLA); a failure reproduced and still not XLA's (an
    allocation no machine could give) or not reproduced at all is 3."""
    if run.failure.kind is Kind.INTERRUPTED or replay_interrupted:
        return ExitCode.INTERRUPTED
    if not run.failure.kind.is_failure:
        return ExitCode.NO_FAILURE
    return ExitCode.OK if judged.proven else ExitCode.NOT_REPRODUCED


def shrink_written(bundle: Path, options: CollectOptions, ui: Ui) -> ExitCode | None:
    """``collect --shrink``: the written bundle, shrunk in place (its modules all stay, the
    shrunk one is added); None when it was not shrunk, the bundle then left as it was."""
    from xla_bugkit.shrink.run import shrink_in_place
    from xla_bugkit.shrink.shrinker import ShrinkOptions

    assert options.shrink is not None
    shrink_options = ShrinkOptions(
        budget=config.parse_budget(options.shrink), timeout=options.replay_timeout
    )
    try:
        written = shrink_in_place(bundle, options=shrink_options, ui=ui)
    except BugkitError as e:
        ui.warn(f"not shrunk: {e}")
        return None
    for line in written.result.findings():
        ui.say(line)
    return ExitCode(written.exit_code)


def bisect_written(bundle: Path, options: CollectOptions, ui: Ui) -> str | None:
    """``collect --bisect``: the written bundle, with the bisect's result in place; returns
    its answer, or None when it could not bisect (the bundle then left as it was)."""
    from xla_bugkit.bisect.run import Range, bisect_in_place

    try:
        chosen = Range(options.wheels, python=options.bisect_python)
        result = bisect_in_place(bundle, chosen, timeout=options.replay_timeout, ui=ui)
    except BugkitError as e:
        ui.warn(f"not bisected: {e}")
        return None
    return result.summary  # the summary says it, -q too: the user asked for it
