"""``xla-bugkit shrink BUNDLE|DUMP_DIR``: the smallest module that still fails, the pass or
flag behind it, and flags that work around it, written as a new bundle."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from xla_bugkit.errors import BugkitError
from xla_bugkit.shrink.run import (
    default_output,
    parse_budget,
    parse_only,
    shrink_bundle,
    shrink_dump,
)
from xla_bugkit.shrink.shrinker import STAGES, ShrinkOptions
from xla_bugkit.ui import Ui


def shrink_command(
    target: Path,
    *,
    out: Path | None = None,
    module_re: str | None = None,
    budget: str = "10m",
    max_probes: int = 1000,
    only: str = ",".join(STAGES),
    timeout: float = 300.0,
    probe_timeout: float | None = None,
    force: bool = False,
    json_output: bool = False,
    ui: Ui | None = None,
) -> int:
    """CLI: shrink, write the bundle, print the findings (or ``--json``, the shrink record)."""
    ui = ui or Ui()
    if max_probes < 1:
        raise BugkitError("--max-probes must be at least 1")
    if probe_timeout is not None and not probe_timeout > 0:
        raise BugkitError("--probe-timeout must be a number of seconds above 0")
    options = ShrinkOptions(
        budget=parse_budget(budget),
        max_probes=max_probes,
        stages=parse_only(only),
        timeout=timeout,
        probe_timeout=probe_timeout,
    )
    if not target.exists():
        raise BugkitError(f"{target} does not exist")
    out = out or default_output(target)
    run = shrink_dump if target.is_dir() else shrink_bundle
    written = run(target, out, module_re=module_re, options=options, force=force, ui=ui)
    if json_output:
        record = {**written.result.record(), "bundle": str(out), "verified": written.verified}
        json.dump(record, sys.stdout, indent=2)
        print()
    else:
        for line in written.result.findings():
            print(line)
        print(f"bundle: {out}")
    return written.exit_code
