"""``xla-bugkit replay FILE``: replay one dumped module, the everyday run_hlo_module."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace as _with
from pathlib import Path

from xla_bugkit import bundle, dumps, flags, replay
from xla_bugkit.errors import EXIT_NOT_REPRODUCED, EXIT_OK, BugkitError
from xla_bugkit.ui import Ui


def _modules_for(target: Path, module_re: str | None) -> list[tuple[Path, dumps.DumpModule]]:
    """The dump modules ``target`` names: a dump dir (filtered by ``module_re``) or one file."""
    if not target.exists():
        raise BugkitError(f"{target} does not exist")
    if target.is_dir():
        index = dumps.index(target)
        pattern = re.compile(module_re) if module_re else None
        found = [m for m in index.modules if pattern is None or pattern.search(m.label)]
        if not found:
            raise BugkitError(f"no module in {target} matches {module_re!r}")
        return [(target, m) for m in found]
    index = dumps.index(target.parent)
    for m in index.modules:
        if any(index.root / f.path == target for f in m.files):
            return [(target.parent, m)]
    raise BugkitError(f"{target.name} is not a file of an XLA dump (module_NNNN.NAME.SUFFIX)")


def replay_target(
    target: Path,
    *,
    module_re: str | None = None,
    snapshot: Path | None = None,
    xla_flags: str = "",
    timeout: float = 300.0,
    ui: Ui | None = None,
) -> list[replay.Verdict]:
    """Replay every module ``target`` names; ``xla_flags`` replace the recorded flags."""
    ui = ui or Ui()
    verdicts = []
    for root, module in _modules_for(target, module_re):
        files = bundle.module_files(root, module)
        if snapshot is not None:
            files["snapshot"] = snapshot
        inp = bundle.replay_input(module.label, files, module.platform)
        if inp is None:
            ui.warn(
                f"{module.label}: no before_optimizations.hlo.pb "
                "(dump with --xla_dump_hlo_as_proto)"
            )
            continue
        if xla_flags:
            inp = _with(inp, xla_flags=tuple(flags.split(xla_flags)))
        with ui.phase(f"replaying {module.label}"):
            verdicts.append(replay.replay(inp, expected=None, timeout=timeout))
    return verdicts


def failed(v: replay.Verdict) -> bool:
    """The module crashed, errored, hung or computed a wrong result."""
    crashed = v.failure is not None and v.failure.kind.is_failure
    return crashed or v.outcome in (replay.Outcome.REPRODUCED_WRONG, replay.Outcome.REPRODUCED_HANG)


def describe(v: replay.Verdict) -> str:
    if v.failure is not None and v.failure.kind.is_failure:
        return f"{v.module}: {v.failure.describe}"
    return f"{v.module}: {v.outcome.value}: {v.evidence}"


def replay_command(
    target: Path,
    *,
    module_re: str | None = None,
    snapshot: Path | None = None,
    flags: str = "",
    timeout: float = 300.0,
    json_output: bool = False,
    ui: Ui | None = None,
) -> int:
    """CLI: print each verdict; exit 0 when a module fails, 3 when all ran and matched."""
    verdicts = replay_target(
        target, module_re=module_re, snapshot=snapshot, xla_flags=flags, timeout=timeout, ui=ui
    )
    if json_output:
        json.dump([v.to_json() for v in verdicts], sys.stdout, indent=2)
        print()
    else:
        for v in verdicts:
            print(describe(v))
            print(f"    inputs: {v.inputs}")
    return EXIT_OK if any(failed(v) for v in verdicts) else EXIT_NOT_REPRODUCED
