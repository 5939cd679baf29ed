"""``xla-bugkit replay FILE``: replay one dumped module, the everyday run_hlo_module."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import platforms
from xla_bugkit.cli import options
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.ui import Ui

if TYPE_CHECKING:
    from xla_bugkit.verdict import Verdict

HELP = "replay one dumped module (run_hlo_module without Bazel)"
DESCRIPTION = (
    "Compile and run a dumped HLO module in a child process, compare it with an op-by-op "
    "reference and its recorded result, and print the verdict."
)
EPILOG = """\
examples:
  xla-bugkit replay dump/module_0006.jit_train_step.before_optimizations.hlo.pb
  xla-bugkit replay dump/ --module jit_train_step --flags "--xla_cpu_enable_fast_math=true"
  xla-bugkit replay m.before_optimizations.hlo.pb --snapshot m.snapshot.123.pb
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", type=Path, help="a before_optimizations.hlo.pb file or a dump dir")
    options.add_module(p, "module in a dump dir", metavar="REGEX")
    p.add_argument("--snapshot", type=Path, help="an HloSnapshot with the inputs to use")
    p.add_argument(
        "--platform",
        choices=platforms.NAMES,
        help="replay on this platform (default: the one the dump was written on, from its "
        "files; a TPU's modules need a TPU, and their Pallas kernels run nowhere else)",
    )
    p.add_argument(
        "--flags",
        default="",
        metavar='"--xla_a=1 ..."',
        help="XLA flags that replace every recorded one (the module's debug options "
        "and those in its compile_options.pb); quote them",
    )
    options.add_timeout(p, "how long the replay may take (default %(default)g s)")
    options.add_tolerance(p)
    options.add_fake_data(p)
    options.add_json(p, "print the verdict as JSON on stdout")


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Print each verdict; exit 0 when a module's verdict says it failed (reproduced), 3 when
    all ran and matched, 1 when none could run (each verdict says why).

    ``--flags`` replace every recorded flag: the module's debug options and the debug options
    recorded in its PJRT folder's compile_options.pb.
    """
    from xla_bugkit.replay import failed, replay_dump
    from xla_bugkit.verdict import Outcome

    verdicts = replay_dump(
        args.target,
        module_re=args.module_re,
        snapshot=args.snapshot,
        platform=args.platform,
        xla_flags=args.flags,
        timeout=args.timeout,
        ui=ui,
        tolerance=options.tolerance(args),
        fake_data=args.fake_data,
    )
    options.emit(args.json, lambda: [v.to_json() for v in verdicts], lambda: render(verdicts))
    if any(failed(v) for v in verdicts):
        return ExitCode.OK
    if all(v.outcome is Outcome.NOT_REPLAYABLE for v in verdicts):
        raise BugkitError("no module could be replayed here")
    return ExitCode.NOT_REPRODUCED


def describe(v: Verdict) -> str:
    """The verdict's own words: its outcome, as ``--json`` gives it, then its evidence."""
    return f"{v.module}: {v.outcome.value}: {v.evidence}"


def render(verdicts: Sequence[Verdict]) -> str:
    """Each verdict, with its inputs and the flags it could not apply."""
    lines = []
    for v in verdicts:
        lines.append(describe(v))
        if v.inputs:  # none when the module was refused before it got any
            lines.append(f"    inputs: {v.inputs}")
        lines += [f"    not applied: {withheld}" for withheld in v.withheld]
    return "\n".join(lines)
