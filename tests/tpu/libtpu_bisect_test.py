"""bisect of a TPU bundle over libtpu releases, on the chip: the ``tpu`` tier.

Needs ``XLA_BUGKIT_LIBTPU_WHEELS``, a folder of libtpu wheels (``pip download --no-deps
libtpu==V`` on a machine with the network; a TPU machine may have none), and is skipped
without it, or where jax sees no TPU. The bundle is one recorded on a TPU v5e: a compile
that needs more HBM than the chip has. Under the libtpu installed with jax (when its wheel is
in the folder), the replay must fail the recorded way, as ``verify`` says it does; every
other release either answers (fails, passes, fails differently) or could not test it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.devices import accelerator_env
from xla_bugkit.errors import ExitCode
from xla_bugkit.releases import cache, libtpu

pytestmark = pytest.mark.tpu

WHEELS = os.environ.get("XLA_BUGKIT_LIBTPU_WHEELS")
BUNDLE = Path(__file__).resolve().parent / "recorded" / "hbm_oom.zip"
PROBE_TIMEOUT = 300.0
RUN_TIMEOUT = 1800.0


@pytest.fixture(scope="module")
def tpu_env() -> dict[str, str]:
    if not WHEELS:
        pytest.skip("XLA_BUGKIT_LIBTPU_WHEELS names no folder of libtpu wheels")
    return accelerator_env("tpu", ("libtpu",), missing="libtpu is not installed", name="TPU",
                           timeout=PROBE_TIMEOUT)  # fmt: skip


def test_bisect_over_libtpu_wheels_on_the_chip(tmp_path: Path, tpu_env: dict[str, str]) -> None:
    assert WHEELS is not None
    env = {**tpu_env, cache.CACHE_ENV: str(tmp_path / "cache")}
    out = tmp_path / "bisected.zip"
    done = subprocess.run([sys.executable, "-m", "xla_bugkit", "bisect", str(BUNDLE), "--wheels",
                           WHEELS, "--json", "-o", str(out)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, env=env)  # fmt: skip
    print(done.stdout[-6000:], done.stderr[-6000:])
    record = json.loads(done.stdout)
    assert record["dist"] == "libtpu"
    listed = libtpu.from_folder(Path(WHEELS))
    assert tuple(record["range"]) == (listed.tried[0], listed.tried[-1])
    seen = {p["version"]: p for p in record["probes"]}
    allowed = {"fails", "passes", "fails differently", "not tried"}
    assert {p["seen"] for p in seen.values()} <= allowed
    for p in seen.values():
        if p["seen"] == "not tried":
            assert p["detail"].startswith("cannot test: ") or "wheel" in p["detail"]
    installed = metadata.version("libtpu")
    if installed in listed.tried:
        assert seen[installed]["seen"] == "fails", seen[installed]
        assert "HBM" in seen[installed]["detail"]
        assert done.returncode == ExitCode.OK
    assert out.exists()
