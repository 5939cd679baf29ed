"""The judged part's modules replayed on the job's stitched inputs (``merge``).

A part's collect replayed its module on what it had: its own process's shards are not the
call's inputs, so it ran on generated values, and a failure that only the job's data shows
did not reproduce there. Once ``stitch`` has put the global inputs together, each module that
has them is replayed on them, as ``verify`` replays the merged bundle (the module's devices
across the job, on the CPU), and its verdict replaces the part's in the merged manifest,
said as on the stitched inputs. The triage is asked again with the new verdicts, by the
function collect asks. A module of a platform this machine lacks keeps the part's verdict,
said as the part's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from xla_bugkit.bundle import issue, triage, wording
from xla_bugkit.bundle.manifest import ModuleEntry
from xla_bugkit.bundle.own_flags import OwnFlags, flag_name, is_finding, without_flags
from xla_bugkit.bundle.parts import Part
from xla_bugkit.bundle.stitch import Stitched
from xla_bugkit.choose.dumps import Role
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import (
    ReplayInput,
    ReplayOptions,
    RunContext,
    elsewhere,
    replay_input,
    replay_module,
)
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict

# The key of a module's ``replay`` record that says which inputs its verdict was judged on.
JUDGED_ON = "judged_on"


@dataclass
class Rejudged:
    """The judged part's modules with the verdicts merge stands by, the title they give, and
    a line for each module merge replayed or could not."""

    modules: list[ModuleEntry]
    title: str
    lines: list[str] = field(default_factory=list)
    replayed: bool = False  # at least one module was replayed on the stitched inputs
    relaxed_by: tuple[str, ...] = ()  # the run's own flags that excuse it (``OwnFlags``)
    # Modules whose part reproduced the failure on other inputs where the stitched ones did
    # not: they keep the part's inputs and verdict.
    unstitched: set[str] = field(default_factory=set)
    # What the replay without the run's own flags showed, on the stitched inputs: it takes
    # the place of the part's own finding, made on other inputs.
    finding: str | None = None
    # Whose the failure is (the manifest's ``blame``): merge's own triage where it replayed,
    # else the part's (None: a part of an older version, which recorded none).
    blame: dict[str, str] | None = None

    def notes(self, part_notes: Sequence[str]) -> list[str]:
        """The part's notes with merge's own-flags finding in place of the part's."""
        if self.finding is None:
            return list(part_notes)
        kept = [n for n in part_notes if not is_finding(n)]
        return [*kept, self.finding]

    @property
    def reproduced(self) -> bool:
        return any(_reproduced(m) for m in self.modules)


def rejudge(failing: Part, inputs: Stitched, *, timeout: float, ui: Ui) -> Rejudged:
    """Replay each of ``failing``'s modules whose inputs were stitched on them (each replay
    within ``timeout`` seconds, or the failure's own bound), and judge the job again."""
    manifest = failing.manifest
    failure = Failure.from_json(manifest["failure"])
    context = RunContext.of_manifest(manifest)
    modules: list[ModuleEntry] = []
    lines: list[str] = []
    replayed = False
    own: OwnFlags | None = None
    unstitched: set[str] = set()
    for module in manifest["modules"]:
        found = inputs.snapshots.get(module["label"])
        if found is None:
            modules.append(module)
            continue
        files = failing.bundle.module_files(module)
        files = {r: p for r, p in files.items() if r != Role.SHARDS.value}
        inp = replay_input(
            module["label"], {**files, Role.SNAPSHOT.value: found[1]}, module["platform"]
        )
        verdict: Verdict | None = None
        if inp is not None and not elsewhere.absent_here(inp.platform):
            with ui.phase(f"replaying {module['label']} on the stitched inputs"):
                verdict = replay_module(
                    inp,
                    expected=failure,
                    context=context,
                    options=ReplayOptions(timeout=failure.replay_timeout(timeout)),
                )
            if elsewhere.missing_platform(verdict):
                verdict = None
        if verdict is None:
            why = (
                f"it needs {elsewhere.needs(inp.platform, manifest['versions'])}, which this "
                "machine lacks"
                if inp is not None
                else "it has nothing to compile"
            )
            kept, said = _kept(module, failing, why)
            modules.append(kept)
            lines.append(f"{module['label']}: {said}")
            continue
        on = (
            f"replayed by merge on the inputs stitched from the shards of {inputs.parts} parts"
            f"{inputs.of(module['label'])}"
        )
        if _reproduced(module) and not verdict.reproduced:
            said = (
                f"part {failing.index}'s verdict, on {module['replay']['inputs']} inputs; "  # type: ignore[index]
                f"{on}, it did not reproduce ({verdict.outcome.value}: {verdict.evidence}), so "
                "the module keeps the inputs it reproduced on"
            )
            modules.append({**module, "replay": {**module["replay"], JUDGED_ON: said}})  # type: ignore[dict-item]
            lines.append(f"{module['label']}: {said}")
            unstitched.add(module["label"])
            continue
        replayed = True
        record: dict[str, Any] = {**verdict.to_json(), JUDGED_ON: on}
        modules.append({**module, "replay": record})
        lines.append(_line(module["label"], verdict, on))
        if own is None and verdict.reproduced and inp is not None:
            own = _without_own_flags(inp, module, manifest, verdict, context, timeout, ui)
    relaxed_by = own.relaxing if own is not None else ()
    judged = judge(manifest, modules, relaxed_by=relaxed_by)
    platform = next((m["platform"] for m in modules if m["platform"]), None)
    title = wording.title(judged, failure, platform) if replayed else manifest["title"]
    finding = f"on the stitched inputs, {own.finding()}" if own is not None else None
    blame = {"whose": judged.whose, "reason": judged.reason} if replayed else manifest.get("blame")
    return Rejudged(modules, title, lines, replayed, relaxed_by, unstitched, finding, blame)


def _without_own_flags(
    inp: ReplayInput,
    module: ModuleEntry,
    manifest: Any,
    proof: Verdict,
    context: RunContext,
    timeout: float,
    ui: Ui,
) -> OwnFlags | None:
    """The module that reproduced on the stitched inputs, replayed on them without the
    XLA flags and compile options the run set itself, as collect replays its own proof
    (``collecting.own_flags.probe``); None when it set none."""
    own = tuple(manifest["xla_flags"])
    options = tuple(module.get("compiler_options") or ())
    if not (own or options):
        return None
    names = {flag_name(f) for f in (*own, *options)}
    as_run = context.input(inp)
    less = replace(as_run, xla_flags=without_flags(as_run.xla_flags, names), flags_given=True)
    failure = Failure.from_json(manifest["failure"])
    wrong = proof.outcome is Outcome.REPRODUCED_WRONG
    with ui.phase(f"replaying {module['label']} without the run's own XLA flags"):
        without = replay_module(
            less,
            expected=failure,
            context=context,
            options=ReplayOptions(timeout=failure.replay_timeout(timeout), reference=wrong),
        )
    return OwnFlags(own, without, wrong_result=wrong, options=options, module=module["name"])


def judge(
    manifest: Any, modules: Sequence[ModuleEntry], *, relaxed_by: Sequence[str] = ()
) -> triage.Triage:
    """The triage of the merged bundle's failure and its modules' verdicts, asked as collect
    asks it (with what the failing process's manifest recorded of its run, and the run's
    own flags that excuse it, ``relaxed_by``)."""
    verdicts = [Verdict.from_json(m["replay"]) for m in modules if m["replay"]]
    cap = (manifest.get("process") or {}).get("memory_cap")
    return triage.triage(
        Failure.from_json(manifest["failure"]),
        verdicts,
        module=modules[0]["name"] if modules else None,
        memory_cap=cap if isinstance(cap, int) else None,
        relaxed_by=relaxed_by,
    )


def _kept(module: ModuleEntry, failing: Part, why: str) -> tuple[ModuleEntry, str]:
    """``module`` with its part's verdict, said as the part's (merge could not replay it),
    and the line that says so."""
    old = module["replay"]
    if old is None:
        return (
            module,
            f"not replayed on the stitched inputs ({why}); part {failing.index} replayed none",
        )
    said = (
        f"part {failing.index}'s verdict, on {old.get('inputs', '?')} inputs: not replayed "
        f"on the stitched inputs ({why})"
    )
    return {**module, "replay": {**old, JUDGED_ON: said}}, said


def _line(label: str, verdict: Verdict, on: str) -> str:
    if _reproduced({"replay": verdict.to_json()}):
        return f"{label}: {on}: {verdict.outcome.value}"
    return f"{label}: {on}, and did not reproduce it ({verdict.outcome.value})"


def _reproduced(module: Any) -> bool:
    return str((module.get("replay") or {}).get("outcome", "")).startswith("reproduced")


def reissued(text: str, manifest: Any, rejudged: Rejudged) -> str:
    """The failing part's ISSUE.md ``text`` saying what the merged manifest says: its
    suggested title, its first sentence and its replay table, each rendered from the part's
    record and from the merged one by the same functions, the one put in place of the other."""
    failure = Failure.from_json(manifest["failure"])
    before = judge(manifest, manifest["modules"])
    after = judge(manifest, rejudged.modules, relaxed_by=rejudged.relaxed_by)
    swaps = [
        (f"Suggested title: {manifest['title']}", f"Suggested title: {rejudged.title}"),
        (wording.sentence(before, failure), wording.sentence(after, failure)),
        (_table(manifest["modules"]), _table(rejudged.modules)),
    ]
    if rejudged.finding is not None:
        said = f"**First:** {issue.plain(rejudged.finding)}."
        swaps += [
            (f"**First:** {issue.plain(n)}.", said) for n in manifest["notes"] if is_finding(n)
        ]
    for old, new in swaps:
        text = text.replace(old, new, 1)
    return text


def _table(modules: Sequence[ModuleEntry]) -> str:
    """ISSUE.md's replay table, as collect renders it, of the modules' recorded verdicts."""
    rows = []
    for m in modules:
        r = m["replay"]
        if r is None:
            continue
        evidence = str(r.get("evidence", ""))
        if (on := r.get(JUDGED_ON)) is not None:
            evidence = f"{evidence} ({on})" if evidence else on
        rows.append(
            (issue.code_span(m["label"]), f"**{issue.plain(r['outcome'])}**", issue.plain(evidence))
        )
    return issue.table(("Module", "Verdict", "Evidence"), rows)
