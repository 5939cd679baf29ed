"""collect and verify on a CUDA device: the one check that needs a GPU.

Skipped (with the reason) where jax has no GPU backend, which is every CI machine here; on
a machine with jax[cuda] it collects (--always) and verifies a small jitted function end to
end. Not yet run on a GPU: the first machine with one will tell. Nothing is probed while
tests are collected: ``-m "not gpu"`` costs nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.devices import accelerator_env

pytestmark = pytest.mark.gpu

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))

# A plain program: what matters here is that a GPU dump is indexed (gpu_after_optimizations),
# bundled and replayed on the GPU, which no CPU machine can show.
GPU_PROGRAM = """
import jax, jax.numpy as jnp
assert jax.devices()[0].platform == "gpu", jax.devices()

@jax.jit
def train_step(w, x):
    return jnp.tanh(x @ w).sum()

print(train_step(jnp.ones((64, 64)), jnp.ones((8, 64))))
"""


# Importing jax with a CUDA backend can take minutes on a loaded machine: the probe gets a
# generous bound, and runs only when this module's test does (not at collection).
PROBE_TIMEOUT = 900.0
CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin")


@pytest.fixture(scope="module")
def gpu_env() -> dict[str, str]:
    """The environment for a GPU run; skips (with the reason) where jax has no GPU here."""
    missing = f"no jax CUDA plugin installed ({' or '.join(CUDA_PLUGINS)})"
    return accelerator_env("gpu", CUDA_PLUGINS, missing=missing, name="CUDA device",
                           timeout=PROBE_TIMEOUT)  # fmt: skip


def test_collect_and_verify_on_a_gpu(tmp_path: Path, gpu_env: dict[str, str]) -> None:
    program = tmp_path / "gpu_program.py"
    program.write_text(GPU_PROGRAM)
    out = tmp_path / "gpu.zip"
    env = gpu_env
    done = subprocess.run([XLA_BUGKIT, "collect", "--always", "-o", str(out), "--", sys.executable,
                           str(program)], capture_output=True, text=True, timeout=900,
                          env=env)  # fmt: skip
    print(done.stderr[-4000:])
    assert out.exists(), done.stderr
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
    assert any("gpu" in m["platform"] for m in manifest["modules"]), manifest["modules"]
    verify = subprocess.run([XLA_BUGKIT, "verify", "--json", str(out)], capture_output=True,
                            text=True, timeout=900, env=env)  # fmt: skip
    print(verify.stdout[-4000:], verify.stderr[-2000:])
    assert verify.returncode == 3, verify.stderr  # it ran, and matched its references
    result = json.loads(verify.stdout)
    assert result["integrity"] == "ok"
    assert {m["verdict"]["outcome"] for m in result["modules"]} == {"not reproduced"}
