"""Replay a framework's module under the framework's own XLA first, where it can (torch_xla
for PyTorch/XLA), with the jaxlib replay as the second opinion.

The jaxlib replay runs a module under jaxlib's XLA, a different version from the one that
failed: a PyTorch/XLA module that aborted under torch_xla may run to completion there (seen:
tests/programs/ptxla_compile_crash.py with torch_xla 2.9.0 and jaxlib 0.10.2). So for a
PyTorch/XLA bundle, where torch_xla is importable, the replay that judges the module is
torch_xla's own (``native_worker``, in a child: a crash stays there), and the jaxlib one is
kept next to it (``Verdict.second``): it decides where the issue goes, since a bug that a
plain jaxlib replay shows is XLA's (``frameworks.issue_repo``). Without torch_xla here, the
jaxlib replay is the only one, and ``fallback_note`` says so.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from xla_bugkit import platforms, proc
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Failure
from xla_bugkit.frameworks import Framework
from xla_bugkit.hlo import flags
from xla_bugkit.replay import _torch_xla, children, judge, protocol, spawn
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.options import PLAIN, ReplayOptions
from xla_bugkit.verdict import Outcome, Verdict

# The child's log, as the rerun has it (``run.adapt``): torch_xla's graph log tells
# an XLA error (a bare RuntimeError) from a Python one when the output is classified.
_VMODULE = {"xla_graph_executor": 3}


def jaxlib_label() -> str:
    """ "jaxlib 0.10.2": the XLA the jaxlib replay runs under (read without importing it)."""
    try:
        return f"jaxlib {metadata.version('jaxlib')}"
    except metadata.PackageNotFoundError:
        return "jaxlib"


def native_label(framework: Framework | None) -> str | None:
    """ "torch_xla 2.9.0's own XLA" when ``framework``'s own replay can run here; else None."""
    if framework is not Framework.PYTORCH_XLA:
        return None
    version = _torch_xla.version()
    return None if version is None else f"torch_xla {version}'s own XLA"


def fallback_note(framework: Framework | None) -> str | None:
    """Why the replay runs under jaxlib only, for a framework that has a replay of its own
    that cannot run here; None when there is nothing to say."""
    if framework is not Framework.PYTORCH_XLA or native_label(framework) is not None:
        return None
    return (
        f"torch_xla is not installed here: the modules are replayed under {jaxlib_label()} "
        "only, not under PyTorch/XLA's own XLA (the XLA that failed)"
    )


def jaxlib_verdict(verdict: Verdict) -> Verdict | None:
    """The jaxlib replay's verdict: ``verdict`` itself, or the second opinion of a replay
    under the framework's own XLA (None when it ran alone)."""
    if verdict.second is not None:
        return verdict.second
    native = bool(verdict.under) and not verdict.under.startswith("jaxlib")
    return None if native else verdict


def reproduced_under_jaxlib(verdicts: Sequence[Verdict]) -> bool:
    """Whether a plain jaxlib replay showed the failure (the bug is then XLA's)."""
    return any((j := jaxlib_verdict(v)) is not None and j.reproduced for v in verdicts)


def replay(
    inp: ReplayInput,
    *,
    framework: Framework | None,
    expected: Failure | None,
    options: ReplayOptions = PLAIN,
) -> Verdict:
    """The verdict on ``inp`` of a ``framework``'s bundle: under the framework's own XLA
    first where it can run, with the jaxlib replay (``judge.replay``) as its ``second``;
    under jaxlib alone otherwise. ``options.keep_arrays`` keeps the jaxlib replay's arrays
    (the bundle's repro.py runs under jaxlib); ``options.spares``: jaxlib replay children
    started ahead (``children.Spares``)."""
    own = native_label(framework)
    native = None
    if own is not None:
        if options.spares is not None:
            options.spares.let_go()  # its device is torch_xla's child's now
        native = replay_native(inp, expected=expected, options=options)
    verdict = judge.replay(inp, expected=expected, options=options)
    if framework in (None, Framework.JAX):
        return verdict
    verdict = replace(verdict, under=jaxlib_label())
    if native is None or own is None:
        return verdict
    return replace(native, under=own, second=verdict)


def child_env(inp: ReplayInput) -> dict[str, str]:
    """The native child's environment: every recorded flag in XLA_FLAGS, torch_xla on the
    module's platform, and its graph log on."""
    env = children.child_env(spawn.admitted_flags(inp).flags, inp.platform)
    found = platforms.find(inp.platform)
    env["PJRT_DEVICE"] = found.pjrt_device if found is not None else inp.platform.upper()
    env[xla_log.MIN_LOG_LEVEL] = "0"
    env[xla_log.VMODULE] = xla_log.merge_vmodule(env.get(xla_log.VMODULE), _VMODULE)
    return env


def replay_native(
    inp: ReplayInput, *, expected: Failure | None, options: ReplayOptions = PLAIN
) -> Verdict:
    """Replay ``inp`` under torch_xla's own XLA in a child process, judged as ``judge``
    judges its own children (no references: a clean run is ``not reproduced``)."""
    memory_limit, timeout = options.memory_limit, options.timeout
    limits = proc.Limits(memory_bytes=memory_limit) if memory_limit else None
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-native-") as tmp:
        out = Path(tmp)
        spec: dict[str, Any] = spawn.child_spec(
            inp, out, use_data=options.use_data, seed=options.seed, reference=False
        )
        spec_path = out / protocol.SPEC
        spec_path.write_text(json.dumps(spec))
        argv = [sys.executable, "-m", "xla_bugkit.replay.child.native_worker", str(spec_path)]
        done = proc.run_captured(argv, env=child_env(inp), timeout=timeout, limits=limits)
        if (unknown := flags.unknown_flag(done.output)) is not None:
            why = f"torch_xla's XLA does not know the recorded flag {unknown}"
            return Verdict(inp.name, Outcome.NOT_REPLAYABLE, why, "")
        verdict = judge.judged(inp, done, out, expected, timeout=timeout, reference=False)
    if verdict.outcome is Outcome.NOT_REPRODUCED and verdict.failure is None:
        # Nothing to compare its result with: wrong results are the jaxlib replay's to judge.
        return replace(verdict, evidence="ran to completion", numbers={})
    return verdict


def replay_label(verdicts: Sequence[Verdict]) -> str | None:
    """ "under torch_xla 2.9.0's own XLA, the XLA that failed (and under jaxlib 0.10.2: not
    reproduced)" when a replay ran under the framework's own XLA; None when none did."""
    first = next((v for v in verdicts if v.second is not None), None)
    if first is None or first.second is None:
        return None
    second = first.second
    outcome = second.outcome.value
    return f"under {first.under}, the XLA that failed (and under {second.under}: {outcome})"
