"""``xla-bugkit replay FILE``: replay one dumped module, the everyday run_hlo_module."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.replay.dump import failed, replay_dump
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance


def describe(v: Verdict) -> str:
    if v.failure is not None and v.failure.kind.is_failure:
        return f"{v.module}: {v.failure.describe}"
    return f"{v.module}: {v.outcome.value}: {v.evidence}"


def replay_command(
    target: Path,
    *,
    module_re: str | None = None,
    snapshot: Path | None = None,
    platform: str | None = None,
    flags: str = "",
    timeout: float = config.REPLAY_TIMEOUT,
    json_output: bool = False,
    ui: Ui | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    fake_data: bool = False,
) -> int:
    """CLI: print each verdict; exit 0 when a module fails, 3 when all ran and matched, 1
    when none could run (each verdict says why).

    ``flags`` replace every recorded flag: the module's debug options and the debug options
    recorded in its PJRT folder's compile_options.pb.
    """
    verdicts = replay_dump(
        target,
        module_re=module_re,
        snapshot=snapshot,
        platform=platform,
        xla_flags=flags,
        timeout=timeout,
        ui=ui,
        tolerance=tolerance,
        fake_data=fake_data,
    )
    if json_output:
        json.dump([v.to_json() for v in verdicts], sys.stdout, indent=2)
        print()
    else:
        for v in verdicts:
            print(describe(v))
            if v.inputs:  # none when the module was refused before it got any
                print(f"    inputs: {v.inputs}")
            for withheld in v.withheld:
                print(f"    not applied: {withheld}")
    if any(failed(v) for v in verdicts):
        return ExitCode.OK
    if all(v.outcome is Outcome.NOT_REPLAYABLE for v in verdicts):
        raise BugkitError("no module could be replayed here")
    return ExitCode.NOT_REPRODUCED
