"""collect and verify on a TPU chip: the `tpu` tier (``python -m pytest -q -m tpu``).

Skipped (with the reason) where libtpu is not installed or jax sees no TPU, which is every CI
machine; CI keeps the TPU features honest with the bundles recorded on a chip
(``recorded_test.py``). On a TPU machine this runs real programs of
``benchmarks/tpu/programs`` under collect, one process on the chip at a time (no ``-n``: a
second process cannot open it), and checks what collect and verify answer there. Nothing is
probed while tests are collected.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.devices import accelerator_env
from xla_bugkit.bundle import members
from xla_bugkit.verdict import COMPILED_DIFFERS, INTERPRET_MODE, OWN_CODE

pytestmark = pytest.mark.tpu

PROGRAMS = Path(__file__).resolve().parents[2] / "benchmarks" / "tpu" / "programs"
# Opening the chip costs 10 to 30 s a process; a collect runs the program and a replay child.
PROBE_TIMEOUT = 300.0
RUN_TIMEOUT = 900.0


@pytest.fixture(scope="module")
def tpu_env() -> dict[str, str]:
    """The environment for a run on the chip; skips (with the reason) where there is none."""
    return accelerator_env("tpu", ("libtpu",), missing="libtpu is not installed", name="TPU",
                           timeout=PROBE_TIMEOUT)  # fmt: skip


def _bugkit(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "xla_bugkit", *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, cwd=cwd, env=env)  # fmt: skip
    print(done.stdout[-4000:], done.stderr[-6000:])
    return done


def _collect(program: str, tmp_path: Path, env: dict[str, str]) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    out = tmp_path / f"{program}.zip"
    done = _bugkit(["collect", "--timeout", "120", "-o", str(out), "--", sys.executable,
                    str(PROGRAMS / f"{program}.py")], tmp_path, env)  # fmt: skip
    assert out.exists(), done.stderr
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
    return done.returncode, done.stderr, manifest


def test_a_mosaic_error_is_reproduced_on_the_chip_and_verified_there(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    code, said, manifest = _collect("mosaic_unaligned", tmp_path, tpu_env)
    assert code == 0, said
    first = manifest["modules"][0]
    assert first["platform"] == "tpu" and "jit_features" in first["label"]
    assert first["replay"]["outcome"] == "reproduced: error"
    assert "kernel: Mosaic E2003" in said and "window_kernel (mosaic_unaligned.py:" in said
    with zipfile.ZipFile(tmp_path / "mosaic_unaligned.zip") as z:
        assert any(f"modules/{first['label']}/mosaic/" in n for n in z.namelist())
    verify = _bugkit(["verify", "--json", str(tmp_path / "mosaic_unaligned.zip")], tmp_path,
                     tpu_env)  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    result = json.loads(verify.stdout)
    assert result["integrity"] == "ok"
    assert result["modules"][0]["verdict"]["outcome"] == "reproduced: error"


def test_the_default_matmul_precision_is_not_called_an_xla_bug(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    code, said, manifest = _collect("precision_check", tmp_path, tpu_env)
    first = manifest["modules"][0]
    assert "jit_dense" in first["label"] and first["platform"] == "tpu"
    assert first["replay"]["numbers"]["precision"] == "default"
    said = " ".join(said.split())
    assert "runs its float32 matmuls at the TPU's default precision" in said
    assert "precision=jax.lax.Precision.HIGHEST" in said
    assert code == 3  # no XLA failure reproduced


def test_a_pallas_kernels_wrong_result_is_proven_by_its_interpret_mode_and_verified(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    """jax-ml/jax#39744: collect runs the program again under Pallas's interpret mode, whose
    outputs are the right values; the compiled kernel's replay differs from them, and verify
    on the chip proves it from the bundle alone (its expected.npz)."""
    code, said, manifest = _collect("pallas_dma_zeros", tmp_path, tpu_env)
    first = manifest["modules"][0]
    assert "jit_head" in first["label"] and first["platform"] == "tpu"
    assert manifest["failure"]["kind"] == "wrong result"
    assert first["replay"]["outcome"] == "reproduced: wrong result", first["replay"]
    assert first["replay"]["evidence"].startswith(COMPILED_DIFFERS)
    assert first["replay"]["numbers"]["reference"] == INTERPRET_MODE
    assert "under Pallas's interpret mode, on the CPU, the program passes" in " ".join(said.split())
    assert code == 0
    bundle = tmp_path / "pallas_dma_zeros.zip"
    with zipfile.ZipFile(bundle) as z:
        assert members.EXPECTED in z.namelist()
        assert f"REFERENCE = {INTERPRET_MODE!r}" in z.read(members.REPRO).decode()
    verify = _bugkit(["verify", "--json", str(bundle)], tmp_path, tpu_env)
    assert verify.returncode == 0, verify.stderr
    replayed = json.loads(verify.stdout)["modules"][0]["verdict"]
    assert replayed["outcome"] == "reproduced: wrong result", replayed
    assert replayed["evidence"].startswith(COMPILED_DIFFERS)


def test_a_pallas_kernels_own_bug_is_not_called_an_xla_bug(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    """A kernel that indexes the wrong row: under the interpret mode the program fails its
    check too, with the same values: the kernel's own code, and no issue link."""
    code, said, manifest = _collect("pallas_own_bug", tmp_path, tpu_env)
    first = manifest["modules"][0]
    assert "jit_head" in first["label"] and first["platform"] == "tpu"
    assert first["replay"]["outcome"] == "not reproduced", first["replay"]
    assert first["replay"]["numbers"]["kernel"] == OWN_CODE
    said = " ".join(said.split())
    assert "the wrong value comes from the Pallas kernel's own code" in said
    assert "no issue link" in said
    assert code == 3  # not reproduced: the compiled kernel computes what its code says
    verify = _bugkit(["verify", "--json", str(tmp_path / "pallas_own_bug.zip")], tmp_path,
                     tpu_env)  # fmt: skip
    replayed = json.loads(verify.stdout)["modules"][0]["verdict"]
    assert replayed["numbers"]["kernel"] == OWN_CODE, replayed


def test_the_runs_tpu_flags_are_recorded_and_verify_applies_them(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    """tpu_flag_vmem's kernel fails only under the flag its run sets in LIBTPU_INIT_ARGS:
    collect's replay reproduces it, and without the flag it compiles, so the limit is the
    user's, not XLA's bug; verify,
    run without the flag, reproduces the failure from the bundle's record alone."""
    flag = "--xla_tpu_scoped_vmem_limit_kib=4096"
    env = {**tpu_env, "LIBTPU_INIT_ARGS": flag}
    code, said, manifest = _collect("tpu_flag_vmem", tmp_path, env)
    assert code == 0, said  # reproduced by the replay under the flag (docs/exit-codes.md)
    assert "does not look like an XLA bug" in said and f"LIBTPU_INIT_ARGS {flag}" in said
    assert manifest["libtpu_init_args"] == [flag]
    assert manifest["modules"][0]["replay"]["outcome"] == "reproduced: error"
    env = {k: v for k, v in tpu_env.items() if k != "LIBTPU_INIT_ARGS"}
    done = _bugkit(["verify", str(tmp_path / "tpu_flag_vmem.zip")], tmp_path, env)
    assert done.returncode == 0 and "the recorded failure reproduces here" in done.stdout


def test_out_of_hbm_beside_the_programs_own_arrays_is_not_called_an_xla_bug(
    tmp_path: Path, tpu_env: dict[str, str]
) -> None:
    _, said, manifest = _collect("hbm_runtime_oom", tmp_path, tpu_env)
    assert manifest["modules"][0]["replay"]["outcome"] == "not reproduced", said
    assert "this does not look like an XLA bug: the accelerator had" in said
    assert "no issue link" in said
