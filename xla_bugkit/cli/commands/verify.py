"""``xla-bugkit verify BUNDLE``: print whether a bundle's failure reproduces here."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from xla_bugkit.cli import options
from xla_bugkit.errors import BugkitError
from xla_bugkit.ui import Ui, shown

if TYPE_CHECKING:
    from xla_bugkit.verify import VerifyResult

HELP = "check a bundle's integrity and replay it here"
DESCRIPTION = (
    "Unpack a bundle safely, check every file against the manifest, replay its modules, and "
    "say whether the recorded failure reproduces on this machine."
)
EPILOG = """\
examples:
  xla-bugkit verify bundle.7z
  xla-bugkit verify --json bug.zip > verdicts.json
  xla-bugkit verify bug/
      a bundle unpacked by hand (unzip bug.zip -d bug): checked as its archive is
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_bundle(p)
    options.add_json(p, "print the verdicts as JSON on stdout")
    p.add_argument(
        "--jaxlib",
        type=options.release_number,
        metavar="VERSION",
        help="replay under this jaxlib release (downloaded through pip once, then cached)",
    )
    options.add_releases(p)
    options.add_timeout(p, "how long each module's replay may take (default %(default)g s)")
    options.add_tolerance(p)
    options.add_fake_data(p)


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Print the verdict table (or JSON); exit 0 when the failure reproduces here.
    ``--jaxlib``: replay under that release (from ``--wheels``, or through pip) instead, under
    the interpreter ``--python`` when given (a release built only for a newer Python)."""
    from xla_bugkit import jaxlib_adapter
    from xla_bugkit.releases import cache
    from xla_bugkit.verify import verify_bundle

    jaxlib, wheels, python = args.jaxlib, args.wheels, args.python
    release = None
    if jaxlib is not None and (python is not None or jaxlib != jaxlib_adapter.jaxlib_version()):
        with ui.phase(f"getting jaxlib {jaxlib}"):
            release = cache.release(jaxlib, wheels, python)
    elif wheels is not None or python is not None:
        given = "--wheels" if wheels is not None else "--python"
        raise BugkitError(f"{given} goes with --jaxlib VERSION: which release to take")
    result = verify_bundle(
        args.bundle,
        timeout=args.timeout,
        ui=ui,
        tolerance=options.tolerance(args),
        fake_data=args.fake_data,
        release=release,
    )
    # The text quotes a stranger's headline, notes and evidence.
    options.emit(args.json, result.to_json, lambda: shown(render_table(result)))
    return result.exit_code


def render_table(result: VerifyResult) -> str:
    from xla_bugkit.bundle.manifest import edited_notice
    from xla_bugkit.failure.classify import Kind
    from xla_bugkit.verdict import Outcome

    lines = [f"recorded failure: {result.failure.describe}"]
    if result.flags:
        # They can be the cause (a pass turned off): a reader of the verdicts must know.
        lines.append(f"the reporter's XLA flags, applied to each replay: {' '.join(result.flags)}")
    for label, own in result.compiler_options:
        lines.append(
            f"the reporter's own compile options of {label}, applied to its replay: {' '.join(own)}"
        )
    # The program's own ending ("non-XLA failure: ALERT ...") and what the reporter's replay
    # made of it (a wrong result) are both part of what was recorded.
    wrong = Outcome.REPRODUCED_WRONG.value
    proof = next((c for c in result.checks if c.recorded == wrong), None)
    if proof is not None and result.failure.kind is not Kind.WRONG_RESULT:
        lines.append(f"the reporter's replay of {proof.label}: {wrong}")
    lines += [f"note: {edited_notice(name)}" for name in result.edited]
    lines += [
        f"note: {name}: read it before you run it: {said}"
        for name, said in result.scripts
        if said != "checked"
    ]
    lines.append("")
    for c in result.checks:
        if c.unverified is not None:
            u = c.unverified
            lines.append(f"{c.label}: unverified: needs {u.needs}, which this machine lacks")
            lines += [f"    checked: {line}" for line in u.checked]
            lines.append(f"    on the CPU: {u.cpu}")
            lines.append(f"    to verify it: {u.command}")
            continue
        if c.verdict is None:
            lines.append(f"{c.label}: not replayable here (no before-optimizations proto)")
            continue
        same = {
            True: "as in the reporter's replay",
            False: f"the reporter's replay: {c.recorded}",
            None: "no recorded verdict",
        }[c.same_as_reporter]
        under = f" under {c.verdict.under}" if c.verdict.under else ""
        lines.append(f"{c.label}: {c.verdict.outcome.value}{under} ({same})")
        inputs = f"inputs: {c.verdict.inputs}; " if c.verdict.inputs else ""
        lines.append(f"    {inputs}evidence: {c.verdict.evidence}")
        lines += [f"    not applied: {w}" for w in c.verdict.withheld]
        if (second := c.verdict.second) is not None:
            lines.append(
                f"    second opinion under {second.under}: {second.outcome.value}: "
                f"{second.evidence}"
            )
        recorded = {
            True: "the same as the reporter's recorded result (deterministic)",
            False: "different from the reporter's recorded result",
            None: None,
        }[c.verdict.matches_recorded]
        if recorded:
            lines.append(f"    output: {recorded}")
    lines += ["", conclusion(result)]
    return "\n".join(lines)


def conclusion(result: VerifyResult) -> str:
    """The table's last line: ``result.found``, and why where it is unverified."""
    from xla_bugkit.verify.result import Found

    if result.found is Found.REPRODUCED:
        return "the recorded failure reproduces here"
    if result.found is Found.NOT_REPRODUCED:
        return "the recorded failure does NOT reproduce here"
    return f"the recorded failure is unverified here: {_why_unverified(result)}"


def _why_unverified(result: VerifyResult) -> str:
    if result.unreplayable and _kernels_only(result) and (error := _not_interpreted(result)):
        return (
            "the module ran, but its Pallas kernel has no reference to check its values "
            f"against: {error}, when the reporter's collect ran the program under it"
        )
    if result.unreplayable and _kernels_only(result):
        return (
            "the module ran, but its Pallas kernel has no reference to check its values "
            "against (see above); run the kernel with pallas_call(..., interpret=True) on the "
            "same inputs to tell"
        )
    if result.unreplayable:
        return (
            "no module of the bundle can be replayed outside the reporter's program (see "
            "above); it takes that program to check it"
        )
    if result.failure.unread_inputs:
        return (
            "the call that hung ran on inputs the reporter's run could not record, and the "
            "replays ran on an earlier call's"
        )
    needs = next(c.unverified.needs for c in result.checks if c.unverified is not None)
    return f"it needs {needs}"


def _not_interpreted(result: VerifyResult) -> str:
    """Why Pallas's interpret mode could not run the kernel at collect ("" where it was not
    tried): ``CANNOT_INTERPRET`` and the error, as the verdict says them."""
    from xla_bugkit.verdict import CANNOT_INTERPRET

    for check in result.checks:
        said = check.verdict.evidence if check.verdict is not None else ""
        if CANNOT_INTERPRET in said:
            return f"{CANNOT_INTERPRET} ({said.split(f'{CANNOT_INTERPRET}: ', 1)[1]})"
    return ""


def _kernels_only(result: VerifyResult) -> bool:
    """Every module ran (on a TPU) but holds a Pallas kernel that nothing can check."""
    from xla_bugkit.replay import KERNEL_ONLY

    verdicts = [c.verdict for c in result.checks]
    return bool(verdicts) and all(v is not None and KERNEL_ONLY in v.evidence for v in verdicts)
