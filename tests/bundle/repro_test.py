"""repro.py from real bundles, run where xla_bugkit cannot be imported: it must show the crash,
the error and jax#39103's wrong result with jax, jaxlib and numpy alone."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import Collected, clean_env
from xla_bugkit.bundle import members, repro
from xla_bugkit.choose.dumps import Role
from xla_bugkit.replay import protocol

pytestmark = pytest.mark.slow  # real jax programs, end to end

# Runs repro.py with the package made unimportable: the script must stand alone.
WITHOUT_XLA_BUGKIT = (
    "import runpy, sys; sys.modules['xla_bugkit'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run_repro(bundle: Collected, where: Path, **env: str) -> subprocess.CompletedProcess[str]:
    folder = bundle.unpack(where / "unpacked")
    argv = [sys.executable, "-c", WITHOUT_XLA_BUGKIT, str(folder / members.REPRO)]
    # cwd is not the bundle: the script finds its files next to itself.
    return subprocess.run(argv, capture_output=True, text=True, cwd=where, timeout=600,
                          env={**clean_env(), **env})  # fmt: skip


def test_the_harness_hides_xla_bugkit(tmp_path: Path) -> None:
    """What the tests below rely on: a script run this way cannot import the package."""
    probe = tmp_path / "probe.py"
    probe.write_text("import xla_bugkit\n")
    argv = [sys.executable, "-c", WITHOUT_XLA_BUGKIT, str(probe)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1
    assert "import of xla_bugkit halted" in done.stderr


def test_repro_shows_the_compile_crash(bundles: Callable[..., Collected], tmp_path: Path) -> None:
    c = bundles("compile_crash")
    assert c.returncode == 0, c.stderr
    done = run_repro(c, tmp_path)
    assert done.returncode == -signal.SIGABRT, done.stdout + done.stderr
    assert "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr" in done.stderr
    assert "compiling module_" in done.stdout and "running it" not in done.stdout
    # A compile crash ran nothing: no inputs were recorded, and none are claimed.
    assert "inputs (generated, seed 42): float32[4]" in done.stdout
    assert members.INPUTS not in c.names()


def test_repro_shows_the_compile_error(bundles: Callable[..., Collected], tmp_path: Path) -> None:
    c = bundles("compile_error")
    assert c.returncode == 0, c.stderr
    done = run_repro(c, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "XLA failed while compiling: JaxRuntimeError: INTERNAL: Too many extra compilation "
        "parts due to non-default options (0)"
    ) in done.stdout
    # The flag the program appended to XLA_FLAGS itself is what breaks the compile.
    assert "--xla_cpu_parallel_codegen_split_count=0" in c.text(members.REPRO)


def test_repro_shows_the_runtime_error_on_recorded_inputs(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    c = bundles("runtime_error")
    # Reproduced, and no machine could give 4 TiB: not XLA's bug, so 3.
    assert c.returncode == 3 and c.manifest()["blame"]["whose"] == "not xla", c.stderr
    # repro.py reads the recorded inputs from the bundled snapshot: they travel once.
    assert members.REPRO in c.names() and members.INPUTS not in c.names()
    done = run_repro(c, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"inputs \(the reporter's, from \S+\.snapshot\.\S+\): float32\[\]", done.stdout
    )
    assert "XLA failed while running: JaxRuntimeError: RESOURCE_EXHAUSTED" in done.stdout


def test_without_real_inputs_repro_runs_on_the_extreme_values_the_replay_showed_it_on(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    # Fast math drops a NaN check: generated inputs agree; only the inf/nan set shows it.
    c = bundles("nan_fast_math", "--no-data")
    assert c.returncode == 3, c.stderr  # reproduced; the program's own fast math allows it
    (module,) = c.manifest()["modules"]
    assert module["replay"]["inputs"] == "extreme values: inf/nan (seed 42)"
    assert {members.REPRO, members.INPUTS, members.EXPECTED} <= set(c.names())
    done = run_repro(c, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "inputs (extreme values: inf/nan (seed 42), the values xla-bugkit's replay showed it "
        "on): float32[4]" in done.stdout
    )
    # The reference comes from the same inputs: only the NaN the check let through differs.
    assert "WRONG RESULT: 1 of 4 elements differ from the op-by-op reference" in done.stdout
    assert "output 0 [0]: expected 0.0, got nan" in done.stdout
    issue = c.text("ISSUE.md")
    assert "extreme values: inf/nan (seed 42), in inputs.npz" in issue
    assert "the reporter's, in the snapshot" not in issue


def test_repro_shows_the_wrong_result_of_jax_39103(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    assert c.returncode == 0, c.stderr
    assert {members.REPRO, members.EXPECTED} <= set(c.names())
    done = run_repro(c, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    found = re.search(
        r"WRONG RESULT: 1 of (16385|32769) elements differ from the op-by-op reference", done.stdout
    )
    assert found, done.stdout
    # The element just past the first 128 KiB of output is the wrong one (see the program).
    n = int(found.group(1))
    assert re.search(rf"output 0 \[{n - 1}\]: expected \S+, got \S+", done.stdout), done.stdout
    assert re.search(
        rf"inputs \(the reporter's, from \S+\): float{64 if n == 16385 else 32}\[{n},3\]",
        done.stdout,
    )


def test_a_users_flag_wins_over_the_recorded_ones(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    """Without the YNN fusion (an empty list turns it off) jax#39103's result is right."""
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    done = run_repro(c, tmp_path, XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the result matches the op-by-op reference: no wrong result here" in done.stdout


def test_a_flag_xla_takes_only_at_start_up_goes_by_xla_flags(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    """A map flag prints as a block in the debug options: the reporter's own flag stands in,
    and XLA refuses it per compile, so the script starts again with it in XLA_FLAGS."""
    c = bundles("success", xla_flags="--xla_backend_extra_options=bogus_opt")
    assert c.returncode == 0, c.stderr  # XLA's backend exits on the unknown LLVM option
    assert "'--xla_backend_extra_options=bogus_opt'" in c.text(members.REPRO)
    done = run_repro(c, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    again = "XLA takes --xla_backend_extra_options=bogus_opt only from XLA_FLAGS: starting again"
    assert again in done.stdout
    assert "the reporter's XLA flags, applied here: " in done.stdout
    assert "--xla_backend_extra_options=bogus_opt" in done.stdout.split("applied here: ")[1]
    assert "xla: Unknown command line argument 'bogus_opt'" in done.stderr


def test_arrays_are_listed_and_the_reference_is_right(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    listed = {f["path"]: f for f in c.manifest()["files"]}
    folder = c.unpack(tmp_path / "b")
    for name in (members.REPRO, members.EXPECTED):
        assert listed[name]["size"] == (folder / name).stat().st_size
    (x,) = c.recorded_inputs()
    assert x.dtype in (np.float64, np.float32)
    (reference,) = protocol.load_arrays(folder / members.EXPECTED)
    # f(x)[k] = sum(x[k] ** 2): the bundled reference is the right answer.
    np.testing.assert_allclose(reference, (x.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)


def test_hlo_command_names_the_text_dump_and_the_flags() -> None:
    files = {
        Role.BEFORE_TEXT.value: "modules/m/m.before_optimizations.txt",
        Role.BEFORE_PROTO.value: "modules/m/m.before_optimizations.hlo.pb",
    }
    flags = ("--xla_disable_all_hlo_passes=true", "--xla_cpu_experimental_ynn_fusion_type=")
    assert repro.hlo_command(files, "cpu", flags) == (
        "run_hlo_module --platform=cpu --input_format=hlo --xla_disable_all_hlo_passes=true "
        "--xla_cpu_experimental_ynn_fusion_type= modules/m/m.before_optimizations.txt"
    )
    del files[Role.BEFORE_TEXT.value]
    assert repro.hlo_command(files, "gpu", ()) == (
        "run_hlo_module --platform=gpu --input_format=pb modules/m/m.before_optimizations.hlo.pb"
    )
    # With the recorded inputs: a line writes them as run_hlo_module reads them, first.
    files[Role.SNAPSHOT.value] = "modules/m/m.snapshot.0.pb"
    assert repro.hlo_command(files, "cpu", ()).splitlines() == [
        "xla-bugkit convert --to literals modules/m/m.snapshot.0.pb inputs.literals.pb",
        "run_hlo_module --platform=cpu --input_format=pb --input_literals_file=inputs.literals.pb "
        "modules/m/m.before_optimizations.hlo.pb",
    ]
    # Under the memory cap the program set itself, which an out-of-memory failure may need.
    capped = repro.hlo_command(files, "cpu", (), memory_cap=3 << 30).splitlines()
    assert capped[1].startswith("(ulimit -v 3145728 && run_hlo_module --platform=cpu ")
    assert capped[1].endswith(" modules/m/m.before_optimizations.hlo.pb)")
