"""Replay fidelity: a replayed module compiles and runs as it did in the program, no more.

Real programs run with dumps on (once per module, side by side); every replay is a real
child. LAPACK kernels must be set up in the child, flags given by hand must replace the ones
recorded in the PJRT folder, and a dump folder recorded there must stay untouched.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from xla_bugkit import proc
from xla_bugkit.failure.classify import Kind
from xla_bugkit.hlo import compile_options
from xla_bugkit.hlo.flags import from_debug_options
from xla_bugkit.replay.dump import replay_dump
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.verdict import Outcome

pytestmark = pytest.mark.slow

DUMP_FLAGS = (
    "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots "
    "--xla_dump_large_constants"
)

PROGRAMS = {
    # Every kind of LAPACK custom call that jnp.linalg and jax.scipy.linalg lower to.
    "linalg": (
        """
        @jax.jit
        def f(a, b):
            spd = a @ a.T + 4.0 * jnp.eye(4, dtype=a.dtype)
            w, _ = jnp.linalg.eigh(spd)
            return (jnp.linalg.solve(spd, b), jnp.linalg.inv(spd), jnp.linalg.cholesky(spd),
                    w, jax.scipy.linalg.expm(a * 0.1))
        rng = np.random.default_rng(0)
        print(f(rng.standard_normal((4, 4)).astype(np.float32), np.ones(4, np.float32))[3])
        """,
        "",
    ),
    # XLA's CPU compiler aborts on this module without its passes (see programs/).
    "crash": (
        "print(jax.jit(lambda x: jax.random.normal(jax.random.key(0), (4,)) + x)(jnp.ones(4)))",
        "--xla_disable_all_hlo_passes=true --xla_cpu_enable_fast_math=true",
    ),
    # The program names a dump folder of its own for one compile: compile_options.pb
    # records it (sys.argv[1]).
    "own_dump_dir": (
        """
        f = jax.jit(lambda x: jnp.sin(x) * 2)
        x = np.ones(4, np.float32)
        print(f.lower(x).compile({"xla_dump_to": sys.argv[1], "xla_dump_hlo_as_proto": True})(x))
        """,
        "",
    ),
}


@dataclass(frozen=True)
class Dumped:
    dump: Path
    returncode: int | None
    output: str

    def hlo(self, name: str) -> Path:
        (found,) = self.dump.glob(f"module_*.{name}.before_optimizations.hlo.pb")
        return found

    def pjrt(self, name: str) -> Path:
        (found,) = (p for p in self.dump.glob(f"module_*.{name}") if p.is_dir())
        return found


def _dump(root: Path, name: str) -> Dumped:
    body, flags = PROGRAMS[name]
    script = root / f"{name}.py"
    script.write_text(f"import sys, jax, jax.numpy as jnp, numpy as np\n{textwrap.dedent(body)}")
    dump = root / f"dump_{name}"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = f"--xla_dump_to={dump} {DUMP_FLAGS} {flags}"
    done = proc.run_captured(
        [sys.executable, str(script), str(root / f"own_{name}")], env=env, timeout=300
    )
    return Dumped(dump, done.returncode, done.output)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dumped]:
    root = tmp_path_factory.mktemp("fidelity")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_dump, root, name) for name in PROGRAMS}
        return {name: future.result() for name, future in futures.items()}


def test_a_module_calling_lapack_replays_and_agrees_with_its_references(
    dumps: dict[str, Dumped],
) -> None:
    linalg = dumps["linalg"]
    assert linalg.returncode == 0, linalg.output
    text = linalg.hlo("jit_f").with_suffix("").with_suffix(".txt").read_text()
    for kernel in ("getrf", "potrf", "syevd", "trsm"):  # solve/inv, cholesky, eigh, solves
        assert f'custom_call_target="lapack_s{kernel}_ffi"' in text
    assert (linalg.pjrt("jit_f") / "compile_options.pb").exists()  # replayed from PJRT's
    (verdict,) = replay_dump(linalg.dump, module_re=r"\.jit_f$")
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.failure is None  # no SIGSEGV in a LAPACK kernel
    assert verdict.evidence == (
        "ran to completion; result agrees with op-by-op, conservative flags"
    )
    assert verdict.inputs == "snapshot"
    assert verdict.matches_recorded is True


def test_a_replay_takes_the_layout_from_compile_options_and_the_flags_by_name(
    dumps: dict[str, Dumped],
) -> None:
    from jax._src.lib import xla_client

    raw = (dumps["crash"].pjrt("jit__lambda") / "compile_options.pb").read_bytes()
    taken = compile_options.for_replay(raw)
    before = xla_client.CompileOptions.ParseFromString(raw)
    after = xla_client.CompileOptions.ParseFromString(taken.serialized)
    assert before.executable_build_options.device_assignment is not None
    assert after.executable_build_options.device_assignment is None
    # The recorded fast-math flag is not taken from the binary record: the module's
    # debug_options dump names it, and the replay applies it from there.
    assert before.executable_build_options.debug_options.xla_cpu_enable_fast_math is True
    assert after.executable_build_options.debug_options.xla_cpu_enable_fast_math is False
    for field in ("num_replicas", "num_partitions", "use_spmd_partitioning"):
        assert getattr(after.executable_build_options, field) == getattr(
            before.executable_build_options, field
        )
    assert (after.num_replicas, after.num_partitions) == (
        before.num_replicas,
        before.num_partitions,
    )
    assert taken.withheld == () and taken.overrides == ()
    assert compile_options.for_replay(taken.serialized).serialized == taken.serialized


def test_flags_given_by_hand_replace_those_recorded_in_compile_options(
    dumps: dict[str, Dumped],
) -> None:
    crash = dumps["crash"]
    assert crash.returncode == -6, crash.output  # SIGABRT while compiling
    folder = crash.pjrt("jit__lambda")
    (debug_options,) = crash.dump.glob("module_*.jit__lambda.debug_options")
    recorded = ReplayInput(
        "jit__lambda",
        crash.hlo("jit__lambda"),
        mlir=folder / "module.mlir",
        compile_options=folder / "compile_options.pb",
        xla_flags=from_debug_options(debug_options.read_text()),
    )
    assert "--xla_disable_all_hlo_passes=true" in recorded.xla_flags
    # The recorded flags: passes off, a crash.
    kept = replay(recorded, expected=None, options=ReplayOptions(reference=False))
    assert kept.failure is not None and kept.failure.kind is Kind.COMPILE_CRASH, kept.evidence
    assert kept.failure.site == "buffer_assignment_util.cc:46"
    # Given by hand, a flag replaces them: the passes run, and the module compiles and runs.
    by_hand = ("--xla_cpu_enable_fast_math=false",)
    hand = replace(recorded, xla_flags=by_hand, flags_given=True)
    given = replay(hand, expected=None, options=ReplayOptions(reference=False))
    assert given.outcome is Outcome.NOT_REPRODUCED, given.evidence
    assert given.failure is None
    assert given.evidence.startswith("ran to completion")


def test_a_dump_folder_recorded_by_the_program_is_not_written(
    dumps: dict[str, Dumped], tmp_path: Path
) -> None:
    own = dumps["own_dump_dir"]
    assert own.returncode == 0, own.output
    recorded_dir = own.dump.parent / "own_own_dump_dir"
    hlo = tmp_path / "module.before_optimizations.hlo.pb"
    hlo.write_bytes(next(recorded_dir.glob("*.before_optimizations.hlo.pb")).read_bytes())
    folder = own.pjrt("jit__lambda")
    assert str(recorded_dir).encode() in (folder / "compile_options.pb").read_bytes()
    shutil.rmtree(recorded_dir)  # whatever the replay writes there would show
    inp = ReplayInput(
        "jit__lambda",
        hlo,
        mlir=folder / "module.mlir",
        compile_options=folder / "compile_options.pb",
    )
    verdict = replay(inp, expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert not recorded_dir.exists()
