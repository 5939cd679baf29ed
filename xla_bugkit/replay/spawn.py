"""Starting a replay child and settling what it runs with: the worker's spec, the flags
(XLA_FLAGS or per-compile options), more CPU devices or a start-up flag when the child asks,
a flag an older release does not know left out, and the program's interpreter falling back
to this one. ``judge`` reads what the settled child did."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xla_bugkit import platforms, proc
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import Phase
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.generated import SEED
from xla_bugkit.replay import protocol
from xla_bugkit.replay.children import Spares, child_env, keeps, taken_ahead, worker
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.protocol import marker

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
PROCESS_FLAGS = frozenset({flags.HOST_DEVICE_COUNT})


@dataclass(frozen=True)
class Child:
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
) -> Child:
    out = Path(spec["out"])
    release = inp.release.path if inp.release is not None else None
    tpu_args = admitted_tpu_args(inp).flags if inp.tpu_args is not None else None
    library = inp.compiler.library if inp.compiler is not None else None
    env = child_env(tuple(env_flags), inp.platform, inp.python, release, tpu_args, library)
    memory = limits["limits"].memory_bytes if limits["limits"] is not None else None
    if (ahead := taken_ahead(env, spec, memory)) is not None:
        return child_of(ahead, out)  # served by the program before its run's record was final
    # A libtpu release's probe (bisect) gets a child of its own: one that cannot load says so.
    if spares is not None and (keeps(inp.platform) or spares.holding) and inp.compiler is None:
        served = spares.serve(worker(inp.python), env, memory, spec, timeout=limits["timeout"])
        return child_of(served, out)
    # Spares run this interpreter, jaxlib and compiler: a replay under another starts afresh.
    ours = inp.python is None and inp.release is None and inp.compiler is None
    waiting = spares.take(env) if spares is not None and ours else None
    if waiting is not None:
        text = json.dumps({**spec, "memory_limit": memory})
        finished = waiting.finish(
            text.encode(), timeout=limits["timeout"], bound=limits.get("bound")
        )
        return child_of(finished, out)
    spec_path = out / protocol.SPEC
    spec_path.write_text(json.dumps(spec))
    done = proc.run_captured([*worker(inp.python), str(spec_path)], env=env, **limits)
    return child_of(done, out)


def child_of(done: proc.Completed, out: Path) -> Child:
    phase = marker(done.output, protocol.PHASE)
    return Child(
        done=done,
        out=out,
        phase={"compile": Phase.COMPILE, None: None}.get(phase, Phase.RUN),
        inputs=marker(done.output, protocol.INPUTS) or "",
        refusal=marker(done.output, protocol.NOT_REPLAYABLE),
        tested=phase in ("reference", "done") and saved(out, protocol.TEST),
    )


def saved(out: Path, stem: str) -> bool:
    return protocol.arrays_path(out, stem).exists()


def spawn_settled(
    inp: ReplayInput,
    spec: dict[str, Any],
    limits: dict[str, Any],
    spares: Spares | None = None,
    dropped: list[str] | None = None,
) -> tuple[Child, ReplayInput]:
    """Spawn the child (one of ``spares`` if it fits, or the one they keep: ``keeps``);
    again with more devices or a flag moved to XLA_FLAGS, if it asks. Returns the child and
    the input as it ran. Under another release (``inp.release``), a recorded flag it does
    not know is left out, and said so in ``dropped``; a release that cannot start the
    replay refuses it."""
    env_flags, spec_flags = split_flags(inp)
    spec = {**spec, "flags": spec_flags}
    while True:
        child = _spawn(inp, spec, env_flags, limits, spares)
        if spares is not None and not keeps(inp.platform):
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
            why = f"jaxlib {inp.release.version} could not start the replay: {last_line(child)}"
            return Child(child.done, child.out, None, "", why), inp
        if inp.compiler is not None and stopped_early and not refused:
            c = inp.compiler
            why = f"{c.dist} {c.version} could not start the replay: {last_line(child)}"
            return Child(child.done, child.out, None, "", why), inp
        if inp.python is not None and stopped_early:
            # The program's interpreter could not get as far as compiling (an older Python,
            # a jaxlib the worker cannot drive): this one replays it, and the verdict says
            # under what.
            inp = replace(inp, python=None)
            continue
        if needs is not None:
            needed, _, here = needs.partition(" ")
            found = platforms.find(inp.platform)
            if found is None or not found.host_devices:
                why = f"the module needs {needed} {inp.platform} devices, {here or '?'} here"
                return Child(child.done, child.out, None, "", why), inp
            # XLA's CPU client can pretend to have as many devices as the module wants.
            env_flags.append(f"{flags.HOST_DEVICE_COUNT}={needed}")
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


def last_line(child: Child) -> str:
    lines = [line.strip() for line in child.done.output.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {child.done.returncode}, no output"


def admitted_flags(inp: ReplayInput) -> flags.Admitted:
    """The flags a replay of ``inp`` applies: those given by hand (less the dump flags), or
    the recorded ones that ``flags.admit`` allows (a bundle is a stranger's)."""
    if inp.flags_given:
        return flags.Admitted(flags.without_dump_flags(inp.xla_flags))
    return flags.admit(inp.xla_flags)


def admitted_tpu_args(inp: ReplayInput) -> flags.Admitted:
    """The run's LIBTPU_INIT_ARGS a replay of ``inp`` applies: on a TPU, those
    ``flags.admit_tpu`` allows (the rest withheld, and said); elsewhere none, and none
    withheld (no TPU compiler reads them), as where none were recorded."""
    found = platforms.find(inp.platform)
    if found is None or found.compiler_env is None or inp.tpu_args is None:
        return flags.Admitted(())
    return flags.admit_tpu(inp.tpu_args)


def split_flags(inp: ReplayInput) -> tuple[list[str], list[str]]:
    """``inp``'s flags as a replay applies them (``admitted_flags``): (those for XLA_FLAGS,
    those for per-compile overrides). A GPU module loads the run's autotune results, from a
    path of ours (a bundle's own path flags are refused), unless it replays under another
    release (``RunContext.input`` drops them where the run's jaxlib was not this one)."""
    recorded = admitted_flags(inp).flags
    env_flags = [f for f in recorded if flags.name_of(f) in PROCESS_FLAGS]
    compile_flags = [f for f in recorded if f not in env_flags]
    found = platforms.find(inp.platform)
    if inp.autotune is not None and inp.release is None and found is not None and found.autotune:
        compile_flags.append(f"{AUTOTUNE_FLAG}={inp.autotune.absolute()}")
    return env_flags, compile_flags


AUTOTUNE_FLAG = "--xla_gpu_load_autotune_results_from"


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
        "hlo_text": str(inp.hlo_text) if inp.hlo_text else None,
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
