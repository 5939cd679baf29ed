"""ISSUE.md for a bundle being built: its title and body, from the run, the chosen modules,
the replay's verdicts and what the staged bundle holds (``Staged``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import frameworks
from xla_bugkit.bundle import (
    envinfo,
    framework_text,
    installed,
    issue,
    members,
    trackers,
    triage,
    wording,
)
from xla_bugkit.bundle.repro import Repro
from xla_bugkit.choose.selection import Selection
from xla_bugkit.failure import mosaic
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.generated import SEED
from xla_bugkit.replay import replay_label
from xla_bugkit.run.record import RunRecord
from xla_bugkit.verdict import INTERPRET_MODE, Outcome, Verdict

INLINE_MODULE_LINES = 60  # a module this short is shown in ISSUE.md itself

Redact = Callable[[str], str]


@dataclass(frozen=True)
class Staged:
    """What the staged bundle holds besides the dump files, for the issue text."""

    repro: Repro | None
    source: str | None  # the script's path in the bundle
    replayed: bool  # the replay stage ran (False: --no-replay)
    framework: frameworks.FrameworkInfo | None = None  # the program's, when it is known
    repo: str | None = None  # the tracker the user named (--repo); None: the framework's
    # Why the run's real inputs are not in the bundle (--no-data, the size budget); "" when
    # they are, or there were none.
    inputs_left_out: str = ""
    jaxpr: tuple[str, str] = ("", "")  # the module's jaxpr: its member name, and its short text
    # The proof's module replayed as the bundle holds it, on generated inputs, when the
    # budget left its real ones out: whether the bundle alone shows the failure.
    as_bundled: Verdict | None = None


def log_tail(output: str, limit: int) -> str:
    """The last ``limit`` characters of ``output``, from a line's start, and how many not."""
    if len(output) <= limit:
        return output
    cut = output[-limit:]
    first_full_line = cut[cut.find("\n") + 1 :]
    return f"[... {len(output) - limit} earlier characters not kept ...]\n{first_full_line}"


def render(
    run: RunRecord,
    selection: Selection,
    verdicts: Sequence[Verdict],
    env: envinfo.EnvReport,
    text: Redact,
    bundle_name: str,
    stage: Path | None = None,
    staged: Staged | None = None,
) -> tuple[str, str]:
    """The issue's suggested title and its body (ISSUE.md)."""
    staged = staged or Staged(None, None, replayed=bool(verdicts))
    f = run.failure
    platform = next((c.module.platform for c in selection.chosen if c.module.platform), None)
    if platform is None and run.culprit is not None:
        # Nothing optimized to name it (a compile error): the failing process's backend.
        platform = run.culprit.process.platform or None
    first = selection.chosen[0].module.name if selection.chosen else None
    judged = triage.of_run(run, verdicts, module=first)
    title = text(wording.title(judged, f, platform))
    rep = staged.repro
    before = _before_text(stage, rep)
    inline = before if len(before.rstrip("\n").splitlines()) <= INLINE_MODULE_LINES else ""
    ctx = issue.IssueContext(
        title=title,
        failure_kind=judged.what,
        signature=text(_key_line(judged, f)),
        description=text(_description(judged, run, selection, verdicts, staged, _has_loop(before))),
        command=text(shlex.join(run.command)),
        exit_status=_exit_text(run),
        verify_command=f"xla-bugkit verify {bundle_name}",
        install=installed.install_command(),
        system_info=env.to_text(),
        # XLA's "Dumping ..." and INFO lines are collect's doing: the report shows the program's.
        log_tail=text(log_tail(run.program_output, 64 * 1024)),
        jax_version=env.version("jax"),
        jaxlib_version=env.version("jaxlib"),
        bundle_name=bundle_name,
        selected_modules=[(c.module.label, "; ".join(c.reasons)) for c in selection.chosen],
        replay_verdicts=[(v.module, _outcome(v, judged), text(v.evidence)) for v in verdicts],
        replay_note=_replay_note(staged),
        repro_command=f"python {members.REPRO}" if rep and rep.script else "",
        repro_missing=rep.missing if rep else "",
        hlo_command=rep.hlo_command if rep else "",
        module_label=rep.module if rep and inline else "",
        module_text=inline,
        jaxpr=staged.jaxpr,
        wrong_values=rep.wrong_values if rep else (),
        reference=rep.reference if rep else "",
        inputs=_inputs_text(rep),
        native_only=_native_only(verdicts),
        form=trackers.form(_tracker(staged, verdicts)),
        fields=trackers.fields(env, f, staged.framework, platform),
    )
    return title, issue.render_issue(ctx)


def _outcome(v: Verdict, judged: triage.Triage) -> str:
    """The verdict's outcome as the table says it: a replay that hung where the program ended
    otherwise is the proof the triage rests on, not a replay that did not reproduce."""
    if judged.verdict is v and v.outcome is Outcome.NOT_REPRODUCED and judged.what == "hang":
        return "hangs (the run ended otherwise)"
    return v.outcome.value


def _native_only(verdicts: Sequence[Verdict]) -> str:
    """The framework's XLA, when only the replay under it showed the failure."""
    for v in verdicts:
        if v.reproduced and v.second is not None and not v.second.reproduced:
            return v.under
    return ""


def _tracker(staged: Staged, verdicts: Sequence[Verdict]) -> str:
    name = staged.framework.name if staged.framework else None
    return trackers.destination(name, verdicts, staged.repo)


def _description(
    judged: triage.Triage,
    run: RunRecord,
    selection: Selection,
    verdicts: Sequence[Verdict],
    staged: Staged,
    looped: bool = False,
) -> str:
    """Markdown: what happened, what the replay showed, what the run set itself that the
    failure may need, what xla-bugkit chose."""
    lines = [wording.sentence(judged, run.failure)]
    if judged.xla:
        lines.append(_replay_line(judged, verdicts, staged))
    if judged.what == "hang" and looped:
        lines.append(
            "The module holds a `while` loop, which runs for as long as its condition holds: "
            "check that the condition can turn false (the function's jaxpr is in the bundle) "
            "before taking this for XLA's hang."
        )
    paragraphs = [" ".join(lines)]
    if (kernel := mosaic.find(run.output)) is not None:
        paragraphs.append(
            f"**Pallas kernel:** {issue.plain(kernel.line())}. Mosaic's dump of the kernel after "
            "each of its passes is in the bundle, in the module's `mosaic/` folder."
        )
    if run.own_flags:
        paragraphs.append(f"**First:** {issue.plain(run.own_flags)}.")
    if run.tpu_args_in_force:
        paragraphs.append(_tpu_args_text(run.tpu_args_in_force))
    if run.memory_cap:
        paragraphs.append(
            f"The failing process ran with its address space capped at "
            f"{_gib(run.memory_cap)} (`RLIMIT_AS`, set by the program or by what started "
            f"it), and the failure may need that cap: {issue.code_span(members.REPRO)} and "
            "`xla-bugkit verify` set it too."
        )
    if (child := _failing_child(run)) is not None:
        paragraphs.append(
            f"The failure is in a process the command started, not the command's own: "
            f"Python ran {issue.code_span(child)} there."
        )
    elif (started := _started_by(run)) is not None:
        pid, parent = started
        paragraphs.append(
            f"The failure is in a process the command started, not the command's own: pid "
            f"{pid}, started by pid {parent} (a worker of `multiprocessing`, say, which runs "
            "with its parent's arguments)."
        )
    label = replay_label(verdicts)
    if staged.framework and (
        said := framework_text.describe(staged.framework, bool(verdicts), label)
    ):
        paragraphs.append(issue.plain(said))
    if staged.source:
        paragraphs.append(
            f"The program's script is attached as {issue.code_span(staged.source)} (redacted)."
        )
    total = len(selection.chosen) + len(selection.others)
    guess = " (a guess: nothing in the failure named a module)" if selection.guess else ""
    paragraphs.append(f"xla-bugkit chose {len(selection.chosen)} of {total} dumped modules{guess}.")
    return "\n\n".join(paragraphs)


def _replay_line(judged: triage.Triage, verdicts: Sequence[Verdict], staged: Staged) -> str:
    if judged.verdict is not None:
        module = issue.code_span(judged.verdict.module)
        if judged.verdict.inputs == "snapshot" and staged.inputs_left_out:
            showed = (
                f"The replay of {module} showed it on the run's real inputs, which this bundle "
                f"leaves out ({issue.plain(staged.inputs_left_out)})"
            )
            bundled = staged.as_bundled
            if bundled is not None and bundled.reproduced:
                how = f"{bundled.outcome.value}, {bundled.inputs}"
                return (
                    f"{showed}; replayed from the bundle on generated inputs, it reproduces "
                    f"as well ({issue.plain(how)})."
                )
            if bundled is not None:
                return (
                    f"{showed}; replayed from the bundle on generated inputs it did not "
                    f"reproduce ({issue.plain(bundled.outcome.value)}: "
                    f"{issue.plain(bundled.evidence)}): it needs the real inputs."
                )
            # Said as it is: what the bundle holds may not show it.
            return (
                f"{showed}: replayed from the bundle, it runs on generated inputs, which may "
                "not show it."
            )
        if judged.verdict.numbers.get("reference") == INTERPRET_MODE:
            return (
                f"Replaying {module} from the bundle reproduces it without the original "
                f"program, against the kernel's outputs under Pallas's interpret mode "
                f"(`{members.EXPECTED}`), which xla-bugkit recorded by running the program "
                "under that mode."
            )
        return f"Replaying {module} from the bundle reproduces it without the original program."
    if any(v.outcome is not Outcome.NOT_REPLAYABLE for v in verdicts):
        return "The bundle's replay did not reproduce it on the reporter's machine."
    if verdicts:
        v = verdicts[0]
        return (
            f"No replay ran: the replay of {issue.code_span(v.module)} could not run "
            f"({issue.plain(v.evidence)}), so nothing shows yet that it reproduces."
        )
    if not staged.replayed:
        return "The replay was skipped (`--no-replay`): nothing shows yet that it reproduces."
    return "No chosen module could be replayed (none has a before-optimizations proto)."


def _key_line(judged: triage.Triage, failure: Failure) -> str:
    # A wrong result's key line is the replay's numbers, not the program's own check.
    if judged.what == "wrong result" and judged.verdict is not None:
        return judged.verdict.evidence
    return failure.headline


def _replay_note(staged: Staged) -> str:
    return "None: the replay was skipped (--no-replay)." if not staged.replayed else ""


_WHILE = re.compile(r"\bwhile\([^()\n]*\), condition=")  # an HLO while instruction


def _has_loop(text: str) -> bool:
    """Whether HLO text holds a while loop."""
    return _WHILE.search(text) is not None


def _before_text(stage: Path | None, rep: Repro | None) -> str:
    """The reproduced module's HLO text ("" when the bundle has none)."""
    if stage is None or rep is None or not rep.before_text:
        return ""
    return (stage / rep.before_text).read_text("utf-8", "replace")


def _inputs_text(rep: Repro | None) -> str:
    if rep is None or not rep.inputs:
        return ""
    if rep.recorded_inputs:
        where = "the reporter's, in the snapshot"
    elif rep.extreme_inputs:
        where = f"{rep.extreme_inputs}, in inputs.npz: the values the replay showed it on"
    else:
        where = f"generated from seed {SEED}"
    return f"{rep.inputs} ({where})"


def _exit_text(run: RunRecord) -> str:
    if run.timed_out:
        return "killed after the timeout"
    if run.interrupted:
        return "stopped by the user"
    if run.failure.signal:
        return run.signal_elsewhere or f"killed by {run.failure.signal}"
    if (thrown_in := run.went_on_from) is not None:
        return f"exit status 0: uncaught in {thrown_in}, and Python went on"
    return f"exit status {run.exit_status}"


# How much of a LIBTPU_INIT_ARGS value the report shows: the manifest has all of it.
_SHOWN = 400


def _tpu_args_text(recorded: Sequence[str]) -> str:
    """The run's LIBTPU_INIT_ARGS, among the flags a failure may need, and which of them
    ``repro.py`` and ``verify`` leave out (``flags.admit_tpu``)."""
    value = flags.join(recorded)
    shown = value if len(value) <= _SHOWN else f"{value[:_SHOWN]}..."
    withheld = [w.removeprefix(f"{flags.TPU_ENV} ") for w in flags.admit_tpu(recorded).withheld]
    more = f"; and {len(withheld) - 3} more" if len(withheld) > 3 else ""
    left_out = f", all but {issue.plain('; '.join(withheld[:3]) + more)}" if withheld else ""
    return (
        f"**TPU compiler flags:** the run set `LIBTPU_INIT_ARGS` to {issue.code_span(shown)}, "
        f"and the failure may need them: {issue.code_span(members.REPRO)} and `xla-bugkit "
        f"verify` set them on a TPU{left_out}."
    )


def _failing_child(run: RunRecord) -> str | None:
    """The failing process's own arguments (its ``sys.argv``, as the capture hook recorded
    them) when they are not the command's: a launcher or a shell script started it."""
    if run.culprit is None or not run.culprit.process.argv:
        return None
    argv = list(run.culprit.process.argv)
    return None if _runs_as(argv, list(run.command)) else shlex.join(argv)


def _started_by(run: RunRecord) -> tuple[int, int] | None:
    """The failing process's pid and that of the recorded process that started it, when it
    has the command's arguments all the same (``multiprocessing``'s spawned workers take
    their parent's ``sys.argv``)."""
    if run.culprit is None:
        return None
    p = run.culprit.process
    parents = run.culprit.recorded | {o.pid for o in run.culprit.others}
    return (p.pid, p.ppid) if p.ppid in parents else None


def _runs_as(argv: list[str], command: list[str]) -> bool:
    """Whether a Python process whose ``sys.argv`` is ``argv`` is the one ``command`` ran:
    its script (or ``-c``, or the module of ``-m``) is on the command line, followed by the
    same arguments."""
    first, rest = argv[0], argv[1:]
    if rest and command[-len(rest) :] != rest:
        return False
    if first == "-c":
        return "-c" in command
    if any(Path(c).name == Path(first).name for c in command):
        return True
    modules = [command[i + 1] for i, c in enumerate(command[:-1]) if c == "-m"]
    path = Path(first).as_posix()
    return any(
        path.endswith((f"{m.replace('.', '/')}.py", f"{m.replace('.', '/')}/__main__.py"))
        for m in modules
    )


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"
