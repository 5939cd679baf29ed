"""What a GPU run adds to a bundle, checked without a GPU: the dump's device description and
autotuning results are kept (as text, redacted), and the environment report names the NVIDIA
libraries and the ptxas a CUDA jax would use."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.bundle import devices, installed, layout
from xla_bugkit.choose import dumps
from xla_bugkit.choose.dumps import Role
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.redact import Redactor

NAMES = (
    "module_0007.jit_step.before_optimizations.txt",
    "module_0007.jit_step.sm_9.0_gpu_after_optimizations.txt",
    "module_0007.jit_step.gpu_target_config.pbtxt",
    "module_0007.jit_step.autotune_results.pbtxt",
    "module_0007.jit_step.ptx",
)


def test_the_gpu_target_and_autotuning_go_into_the_bundle(tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / name).write_text(f"# {name}\n")
    index = dumps.index(tmp_path)
    (module,) = index.modules
    roles = {f.path.name: f.role for f in module.files}
    assert roles["module_0007.jit_step.gpu_target_config.pbtxt"] is Role.GPU_TARGET
    assert roles["module_0007.jit_step.autotune_results.pbtxt"] is Role.AUTOTUNE
    planned = layout.plan(index, [Chosen(module, ("chosen",), 1)])
    kept = {p.role for p in planned}
    assert {Role.GPU_TARGET, Role.AUTOTUNE, Role.BEFORE_TEXT} <= kept
    assert Role.BACKEND not in kept  # PTX stays behind: large, and rebuilt by a replay
    # Text: redacted as text on the way in, not reported as unreadable binary.
    stage = tmp_path / "stage"
    unredacted: list[str] = []
    layout.stage(planned, stage, Redactor(home=str(tmp_path)), unredacted)
    assert unredacted == []


def test_the_nvidia_wheels_are_listed_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for folder in ("nvidia_cudnn_cu12-9.8.0.87", "numpy-2.2.0", "nvidia_cublas_cu12-12.9.1.4"):
        (tmp_path / f"{folder}.dist-info").mkdir()
    (tmp_path / "nvidia").mkdir()  # the libraries themselves: not a distribution
    monkeypatch.setattr(installed.sys, "path", [str(tmp_path)])
    assert installed.nvidia_dists() == [
        ("nvidia-cublas-cu12", "12.9.1.4"),
        ("nvidia-cudnn-cu12", "9.8.0.87"),
    ]


def test_ptxas_is_reported_only_where_jax_can_compile_for_cuda(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ptxas = tmp_path / "ptxas"
    ptxas.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    ptxas.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    found = {"jax-cuda12-plugin": "0.10.2"}
    monkeypatch.setattr(installed, "dist_version", lambda d: found.get(d, installed.NOT_INSTALLED))
    assert "release 12.8" in (devices.ptxas(Redactor()) or "")
    found.clear()
    assert devices.ptxas(Redactor()) is None
