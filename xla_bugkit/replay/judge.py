"""Replay one dumped HLO module in a child process and say whether the bug shows.

The child (``worker``) compiles the before-optimizations module with the recorded XLA
flags and runs it on the snapshot's arguments. A crash, error or hang in the child is compared
with the failure recorded when the bundle was made; a clean run is compared with independent
references (op by op, and the module under conservative flags), which the same child computes
after saving the test's outputs, to catch wrong results. The parent never loads XLA, so an
abort, a segfault or a hang cannot take it down.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import config, flags, proc
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.hlo.generated import SEED
from xla_bugkit.replay import extreme, protocol
from xla_bugkit.replay.children import Spares, child_env, worker
from xla_bugkit.replay.compare import Comparison, compare_outputs
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.protocol import marker
from xla_bugkit.replay.tolerance import DEFAULT_TOLERANCE
from xla_bugkit.replay.verdict import Outcome, Verdict

# Reference flags: exact IEEE semantics, little optimization (run_hlo_module's reference clone
# likewise turns off fast math and fast min/max). All exist in jaxlib 0.10.2; one an older
# jaxlib does not know is dropped (the worker's ``_conservative``).
CONSERVATIVE_FLAGS = (
    "--xla_cpu_enable_fast_math=false",
    "--xla_cpu_fast_math_honor_nans=true",
    "--xla_cpu_fast_math_honor_infs=true",
    "--xla_cpu_fast_math_honor_division=true",
    "--xla_cpu_fast_math_honor_functions=true",
    "--xla_cpu_enable_fast_min_max=false",
    "--xla_gpu_enable_fast_min_max=false",
    "--xla_backend_optimization_level=0",
    # No fusions into outside libraries (YNNPACK, XNNPACK, oneDNN): an empty list turns each
    # off. jaxlib 0.10.2 miscompiles through its YNN fusion (jax#39103) even at
    # optimization level 0, so a reference that kept it would share that bug.
    "--xla_cpu_experimental_ynn_fusion_type=",
    "--xla_cpu_experimental_xnn_fusion_type=",
    "--xla_cpu_experimental_onednn_fusion_type=",
)
# Flags the client reads once, when the backend starts: no per-compile override can set them.
PROCESS_FLAGS = frozenset({"--xla_force_host_platform_device_count"})


@dataclass(frozen=True)
class _Child:
    """What a replay child left: its status and markers, and its output folder."""

    done: proc.Completed
    out: Path
    phase: Phase | None
    inputs: str
    refusal: str | None  # the NOT_REPLAYABLE reason
    tested: bool = False  # the test ran to the end and its outputs are saved


def _spawn(
    inp: ReplayInput,
    spec: dict[str, Any],
    env_flags: list[str],
    limits: dict[str, Any],
    spares: Spares | None = None,
) -> _Child:
    out = Path(spec["out"])
    release = inp.release.path if inp.release is not None else None
    env = child_env(tuple(env_flags), inp.platform, inp.python, release)
    # Spares run this interpreter and jaxlib: a replay under another starts afresh.
    ours = inp.python is None and inp.release is None
    waiting = spares.take(env) if spares is not None and ours else None
    if waiting is not None:
        memory = limits["limits"].memory_bytes if limits["limits"] is not None else None
        text = json.dumps({**spec, "memory_limit": memory})
        return _child_of(waiting.finish(text.encode(), timeout=limits["timeout"]), out)
    spec_path = out / protocol.SPEC
    spec_path.write_text(json.dumps(spec))
    done = proc.run_captured([*worker(inp.python), str(spec_path)], env=env, **limits)
    return _child_of(done, out)


def _child_of(done: proc.Completed, out: Path) -> _Child:
    phase = marker(done.output, protocol.PHASE)
    return _Child(
        done=done,
        out=out,
        phase={"compile": Phase.COMPILE, None: None}.get(phase, Phase.RUN),
        inputs=marker(done.output, protocol.INPUTS) or "",
        refusal=marker(done.output, protocol.NOT_REPLAYABLE),
        tested=phase in ("reference", "done") and _saved(out, protocol.TEST),
    )


def _saved(out: Path, stem: str) -> bool:
    return protocol.arrays_path(out, stem).exists()


def _under(asked: ReplayInput, ran: ReplayInput, child: _Child) -> str:
    """What a replay asked to run under the program's interpreter ran under."""
    xla = marker(child.done.output, protocol.UNDER) or "jaxlib"
    if ran.python is not None:
        return f"{xla} of the program's interpreter"
    return f"{xla} of xla-bugkit's (the program's interpreter {asked.python} could not run it)"


def _spawn_settled(
    inp: ReplayInput,
    spec: dict[str, Any],
    limits: dict[str, Any],
    spares: Spares | None = None,
    dropped: list[str] | None = None,
) -> tuple[_Child, ReplayInput]:
    """Spawn the child (one of ``spares`` if it fits); again with more devices or a flag
    moved to XLA_FLAGS, if it asks. Returns the child and the input as it ran. Under another
    release (``inp.release``), a recorded flag it does not know is left out, and said so in
    ``dropped``; a release that cannot start the replay refuses it."""
    env_flags, spec_flags = split_flags(inp)
    spec = {**spec, "flags": spec_flags}
    while True:
        child = _spawn(inp, spec, env_flags, limits, spares)
        spares = None  # a child asked for more than a spare was started with
        needs = marker(child.done.output, protocol.NEEDS_DEVICES)
        rejected = marker(child.done.output, protocol.REJECTED_FLAG)
        started = marker(child.done.output, protocol.PHASE) is not None
        unknown = flags.unknown_flag(child.done.output)
        known = [f for f in env_flags if flags.name_of(f) != unknown]
        if inp.release is not None and dropped is not None and known != env_flags:
            # An older XLA aborts at start-up on a flag it does not have yet.
            env_flags = known
            dropped.append(f"{unknown}: jaxlib {inp.release.version} does not know it")
            continue
        # The child ended before compiling, and asked for nothing a retry could give.
        stopped_early = not started and needs is None and rejected is None
        refused = marker(child.done.output, protocol.NOT_REPLAYABLE) is not None
        if inp.release is not None and stopped_early and not refused:
            why = f"jaxlib {inp.release.version} could not start the replay: {_last_line(child)}"
            return _Child(child.done, child.out, None, "", why), inp
        if inp.python is not None and stopped_early:
            # The program's interpreter could not get as far as compiling (an older Python,
            # a jaxlib the worker cannot drive): this one replays it, and the verdict says
            # under what.
            inp = replace(inp, python=None)
            continue
        if needs is not None:
            needed, _, here = needs.partition(" ")
            if inp.platform != "cpu":
                why = f"the module needs {needed} {inp.platform} devices, {here or '?'} here"
                return _Child(child.done, child.out, None, "", why), inp
            # XLA's CPU client can pretend to have as many devices as the module wants.
            env_flags.append(f"--xla_force_host_platform_device_count={needed}")
        elif rejected is not None:
            # XLA takes this flag only at start-up; the references then run with it too.
            moved = [f for f in spec["flags"] if flags.name_of(f).lstrip("-") == rejected]
            env_flags.extend(moved)
            spec = {**spec, "flags": [f for f in spec["flags"] if f not in moved]}
        elif unknown is not None:
            # XLA aborts at start-up on a flag it does not know: no fault of the module.
            raise BugkitError(f"unknown XLA flag {unknown}")
        else:
            return child, inp


def _last_line(child: _Child) -> str:
    lines = [line.strip() for line in child.done.output.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {child.done.returncode}, no output"


def admitted_flags(inp: ReplayInput) -> flags.Admitted:
    """The flags a replay of ``inp`` applies: those given by hand (less the dump flags), or
    the recorded ones that ``flags.admit`` allows (a bundle is a stranger's)."""
    if inp.flags_given:
        return flags.Admitted(flags.without_dump_flags(inp.xla_flags))
    return flags.admit(inp.xla_flags)


def split_flags(inp: ReplayInput) -> tuple[list[str], list[str]]:
    """``inp``'s flags as a replay applies them (``admitted_flags``): (those for XLA_FLAGS,
    those for per-compile overrides)."""
    recorded = admitted_flags(inp).flags
    env_flags = [f for f in recorded if flags.name_of(f) in PROCESS_FLAGS]
    return env_flags, [f for f in recorded if f not in env_flags]


def child_spec(
    inp: ReplayInput,
    out: Path,
    *,
    use_data: bool = True,
    seed: int = SEED,
    reference: bool = True,
    extreme_set: str | None = None,
) -> dict[str, Any]:
    """What a replay child (``worker``) is asked to do for ``inp``, leaving its arrays in
    ``out``; without the flags, which ``split_flags`` gives. ``extreme_set``: generate the
    inputs from that set of ``extreme`` instead of normal values."""
    return {
        "extreme": extreme_set,
        "hlo": str(inp.hlo),
        "snapshot": str(inp.snapshot) if inp.snapshot else None,
        "mlir": str(inp.mlir) if inp.mlir else None,
        "compile_options": str(inp.compile_options) if inp.compile_options else None,
        "flags_given": inp.flags_given,
        "platform": inp.platform,
        "use_data": use_data,
        "seed": seed,
        "out": str(out),
        "reference": reference,
        "conservative": list(CONSERVATIVE_FLAGS),
    }


def replay(
    inp: ReplayInput,
    *,
    expected: Failure | None,
    timeout: float = config.REPLAY_TIMEOUT,
    memory_limit: int | None = None,
    use_data: bool = True,
    seed: int = SEED,
    reference: bool = True,
    keep_arrays: Path | None = None,
    extreme_set: str | None = None,
    spares: Spares | None = None,
) -> Verdict:
    """Replay ``inp`` in a child process and judge the result against ``expected``.

    ``expected`` is the failure recorded when the bundle was made; None (or a success) means
    the program finished and a wrong result is suspected. ``use_data=False`` (or a missing
    snapshot) runs on inputs generated from ``seed``. ``reference=False`` skips the
    wrong-result check. The child gets ``timeout`` seconds and ``memory_limit`` bytes for the
    test and the references together; a reference cut short is reported missing, never as a
    failure of the module. ``keep_arrays``: a folder to copy the child's arrays into (the
    test's outputs and the references, as ``protocol.save_arrays`` wrote them).

    A wrong result that generated inputs do not show is tried on extreme values too
    (``extreme_set``, one of ``extreme.SETS``); the verdict names the set that showed it
    (its arrays are not kept: the bundle's repro.py runs on the generated inputs).
    ``spares``: children started ahead, one of which may run the replay.
    """
    limits: dict[str, Any] = {
        "timeout": timeout,
        "limits": proc.Limits(memory_bytes=memory_limit) if memory_limit else None,
    }
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-replay-") as tmp:
        spec = child_spec(
            inp,
            Path(tmp),
            use_data=use_data,
            seed=seed,
            reference=reference,
            extreme_set=extreme_set,
        )
        dropped: list[str] = []
        child, ran = _spawn_settled(inp, spec, limits, spares, dropped)
        if keep_arrays is not None:
            keep_arrays.mkdir(parents=True, exist_ok=True)
            for saved in Path(tmp).glob("*.npz"):
                shutil.copyfile(saved, keep_arrays / saved.name)
        verdict = _verdict(inp, child, expected, timeout, reference=reference)
        if inp.python is not None:
            verdict = replace(verdict, under=_under(inp, ran, child))
        if inp.release is not None:
            withheld = (*verdict.withheld, *dropped)
            verdict = replace(verdict, under=f"jaxlib {inp.release.version}", withheld=withheld)
    if extreme_set is not None or not reference:
        return verdict

    def on_extremes(name: str) -> Verdict:
        # The arrays kept are those of the verdict returned: a set's replace the first
        # run's only when that set showed the failure.
        with tempfile.TemporaryDirectory(prefix="xla-bugkit-extreme-") as tmp:
            kept = Path(tmp) if keep_arrays is not None else None
            again = replay(
                inp,
                expected=expected,
                timeout=timeout,
                memory_limit=memory_limit,
                use_data=use_data,
                seed=seed,
                keep_arrays=kept,
                extreme_set=name,
            )
            if again.reproduced and kept is not None and keep_arrays is not None:
                for old in keep_arrays.glob("*.npz"):
                    old.unlink()
                for saved in kept.glob("*.npz"):
                    shutil.copyfile(saved, keep_arrays / saved.name)
        return again

    return extreme.retry(verdict, expected, on_extremes)


def judged(
    inp: ReplayInput,
    done: proc.Completed,
    out: Path,
    expected: Failure | None,
    *,
    timeout: float,
    reference: bool = True,
) -> Verdict:
    """The verdict on a child that already replayed ``inp`` (``done``: its status and
    output, ``out``: its arrays), as ``replay`` judges its own: for callers that run several
    modules in one child."""
    return _verdict(inp, _child_of(done, out), expected, timeout, reference=reference)


def _verdict(
    inp: ReplayInput, child: _Child, expected: Failure | None, timeout: float, *, reference: bool
) -> Verdict:
    verdict = None if child.tested else _judge_failure(inp, child, expected, timeout)
    verdict = verdict or _judge_result(inp, child, expected, timeout if reference else None)
    recorded = protocol.markers(child.done.output, protocol.WITHHELD)
    withheld = (*admitted_flags(inp).withheld, *recorded)
    return replace(verdict, withheld=withheld) if withheld else verdict


def _expected_kind(expected: Failure | None) -> Kind:
    return Kind.SUCCESS if expected is None else expected.kind


def _wrong_result_suspected(expected: Failure | None) -> bool:
    """The run showed no XLA failure: it succeeded, or the program's own check failed
    (a wrong value it found, or any other non-XLA exit)."""
    return _expected_kind(expected) in (Kind.SUCCESS, Kind.WRONG_RESULT, Kind.EXIT)


def _judge_failure(
    inp: ReplayInput, child: _Child, expected: Failure | None, timeout: float
) -> Verdict | None:
    """The verdict when the test child did not run to the end; None when it did."""
    base = Verdict(inp.name, Outcome.NOT_REPRODUCED, "", child.inputs)
    done = child.done
    if child.refusal is not None:
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, child.refusal, child.inputs)
    failure = classify(
        done.output, exit_status=done.returncode, timed_out=done.timed_out, phase=child.phase
    )
    where = "compiling" if child.phase is Phase.COMPILE else "running"
    if done.timed_out and child.phase is None:
        # It never got as far as compiling (importing jax on a loaded machine, say): that
        # proves nothing about the module either way.
        evidence = (
            f"the replay did not start compiling within {timeout:g} s "
            "(a busy machine? give it longer with --replay-timeout)"
        )
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, evidence, child.inputs)
    if done.timed_out:
        hang = _expected_kind(expected) is Kind.HANG
        outcome = Outcome.REPRODUCED_HANG if hang else Outcome.NOT_REPRODUCED
        evidence = f"no result after {timeout:g} s while {where}"
        if not hang:
            evidence += f" (a hang, though {_expected_kind(expected).value} was expected)"
        return Verdict(inp.name, outcome, evidence, child.inputs, failure)
    if not failure.kind.is_failure:
        return None
    if expected is not None and expected.kind.is_failure and expected.same_bug(failure):
        crashed = failure.kind in (Kind.COMPILE_CRASH, Kind.CRASH)
        outcome = Outcome.REPRODUCED_CRASH if crashed else Outcome.REPRODUCED_ERROR
        evidence = failure.describe
        if _lost_here(expected):
            evidence = f"the run's message was not captured; the replay's: {evidence}"
        elif not expected.message_lost and expected.signature != failure.signature:
            # The same failure, spelled otherwise: by another build (names, literals), or as
            # the program met it (an abort reading a result XLA failed to compute).
            evidence += f" (the run showed it as: {expected.headline[:160]})"
        return Verdict(inp.name, outcome, evidence, child.inputs, failure)
    differently = "differently" if expected is not None and expected.kind.is_failure else ""
    evidence = f"the replay failed {differently} while {where}: {failure.describe}"
    return Verdict(inp.name, base.outcome, " ".join(evidence.split()), child.inputs, failure)


def _lost_here(expected: Failure) -> bool:
    """The run's message was lost and nothing has stood in for it yet."""
    return expected.message_lost and not (expected.evidence or "").startswith("the run's message")


def _load(path: Path) -> list[np.ndarray] | None:
    return protocol.load_arrays(path) if path.exists() else None


def _references(
    child: _Child, timeout: float | None
) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """The reference results that exist, and why the others are missing (None: none asked)."""
    found: dict[str, list[np.ndarray]] = {}
    missing: list[str] = []
    if timeout is None:
        return found, missing
    done = child.done
    if done.timed_out:
        ended = f"no result after {timeout:g} s"
    else:
        ended = classify(done.output, exit_status=done.returncode, phase=Phase.RUN).describe
    references = (("op-by-op", protocol.OPBYOP), ("conservative flags", protocol.CONSERVATIVE))
    for label, stem in references:
        arrays = _load(protocol.arrays_path(child.out, stem))
        error = protocol.error_path(child.out, stem)
        if arrays is not None:
            found[label] = arrays
        elif error.exists():
            missing.append(f"{label}: {error.read_text()[:200]}")
        else:
            missing.append(f"{label}: the replay child ended first ({ended[:200]})")
    return found, missing


def _judge_result(
    inp: ReplayInput, test: _Child, expected: Failure | None, timeout: float | None
) -> Verdict:
    """The verdict on a test that ran to the end; ``timeout`` None: no references asked."""
    outputs = _load(protocol.arrays_path(test.out, protocol.TEST)) or []
    recorded = _load(protocol.arrays_path(test.out, protocol.RECORDED))
    tolerance = inp.tolerance
    matches = (
        None if recorded is None else compare_outputs(outputs, recorded, tolerance=tolerance).close
    )
    found, missing = _references(test, timeout)
    wrong: tuple[str, Comparison] | None = None
    agreeing: list[str] = []
    for label, arrays in found.items():
        comparison = compare_outputs(outputs, arrays, tolerance=tolerance)
        if comparison.close:
            agreeing.append(label)
        elif wrong is None:
            wrong = (label, comparison)
    disputed = ""
    if wrong is not None and "op-by-op" in agreeing:
        # Whole-module optimizations never touch the op-by-op reference. When it agrees with
        # the test, a whole-module reference that differs has a miscompile of its own (as the
        # YNN fusion of jax#39103 once did under the conservative flags), not the test.
        disputed = f" (the {wrong[0]} reference differs: {wrong[1].summary()})"
        wrong = None
    suspected = _wrong_result_suspected(expected)
    if wrong is not None:
        label, comparison = wrong
        numbers = {**comparison.numbers(), "reference": label}
        evidence = f"result differs from the {label} reference: {comparison.summary()}"
        if tolerance != DEFAULT_TOLERANCE:
            evidence += f" (at {tolerance.describe()})"
        outcome = Outcome.REPRODUCED_WRONG if suspected else Outcome.NOT_REPRODUCED
        if not suspected:
            evidence = f"ran without the expected {_expected_kind(expected).value}; {evidence}"
        return Verdict(inp.name, outcome, evidence, test.inputs, None, numbers, matches)
    agreed = ", ".join(agreeing) or "no reference"
    evidence = f"ran to completion; result agrees with {agreed}{disputed}"
    if missing:
        evidence += f" (missing: {'; '.join(missing)})"
    return Verdict(
        inp.name,
        Outcome.NOT_REPRODUCED,
        evidence,
        test.inputs,
        None,
        {"reference": agreed},
        matches,
    )
