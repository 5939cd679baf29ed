"""Which reference verify gives a module from the bundle alone: a Pallas kernel's outputs
under the interpret mode, which only the reporter's collect could record (expected.npz),
for the module the reporter's verdict judged by them."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xla_bugkit import proc
from xla_bugkit.bundle import members
from xla_bugkit.bundle.manifest import OpenBundle
from xla_bugkit.replay import children, protocol, spawn
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import INTERPRET_MODE, OWN_CODE, Outcome
from xla_bugkit.verify.run import _interpreted, npz_fits, verify_bundle

# Collected on a TPU v5e chip: a Pallas DMA that returns zeros compiled (jax-ml/jax#39744).
PALLAS = Path(__file__).parents[1] / "tpu" / "recorded" / "pallas_dma_zeros.zip"


def opened(tmp_path: Path, **numbers: Any) -> OpenBundle:
    """The recorded bundle, its module's verdict judged by ``numbers``, with expected.npz."""
    with zipfile.ZipFile(PALLAS) as z:
        manifest = json.loads(z.read("manifest.json"))
    manifest = copy.deepcopy(manifest)
    manifest["modules"][0]["replay"]["numbers"] = numbers
    protocol.save_arrays(tmp_path / members.EXPECTED, [np.ones((2, 128), np.float32)])
    return OpenBundle(PALLAS, tmp_path, manifest, ())


def test_a_kernel_judged_by_its_interpret_mode_is_held_to_the_bundled_outputs(
    tmp_path: Path,
) -> None:
    b = opened(tmp_path, reference=INTERPRET_MODE, mismatches=256, elements=256)
    found = _interpreted(b, b.manifest["modules"][0])
    assert found is not None
    assert (found.outputs, found.error, found.passed) == (tmp_path / members.EXPECTED, "", None)


def test_the_kernels_own_code_is_judged_again_with_the_check_that_failed(tmp_path: Path) -> None:
    b = opened(tmp_path, reference=INTERPRET_MODE, kernel=OWN_CODE)
    found = _interpreted(b, b.manifest["modules"][0])
    assert found is not None and found.passed is False


def test_no_interpret_mode_reference_where_the_reporter_judged_by_none(tmp_path: Path) -> None:
    b = opened(tmp_path)  # the recorded verdict: no reference at all
    assert _interpreted(b, b.manifest["modules"][0]) is None
    b = opened(tmp_path, reference=INTERPRET_MODE)
    (tmp_path / members.EXPECTED).unlink()
    assert _interpreted(b, b.manifest["modules"][0]) is None


def test_a_strangers_expected_outputs_are_read_only_within_bounds(tmp_path: Path) -> None:
    """expected.npz comes from the bundle: it is loaded in verify's own process only while
    its members are arrays whose declared sizes fit the archive's bound."""
    b = opened(tmp_path, reference=INTERPRET_MODE)
    expected = tmp_path / members.EXPECTED
    assert npz_fits(expected) and not npz_fits(expected, limit=100)  # 2x128 float32 declared
    with zipfile.ZipFile(expected, "a") as z:
        z.writestr("payload.pkl", b"not an array")
    assert not npz_fits(expected)
    assert _interpreted(b, b.manifest["modules"][0]) is None
    expected.write_bytes(b"PK\x03\x04 not a zip")
    assert not npz_fits(expected)


@pytest.fixture(scope="module")
def two_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle of two modules: jax#39103's wrong value, and a module that computes
    right (collected from a training loop whose own check found the value)."""
    out = tmp_path_factory.mktemp("verify") / "bug.zip"
    program = Path(__file__).parents[1] / "programs" / "training_wrong.py"
    argv = [str(Path(sys.executable).with_name("xla-bugkit")), "collect", "-q", "-o", str(out),
            "--", sys.executable, str(program)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_verify_replays_every_module_in_one_kept_child_with_the_same_verdicts(
    two_modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended: list[tuple[str, int | None]] = []
    child_of = spawn.child_of

    def watched(done: proc.Completed, out: Path) -> spawn.Child:
        ended.append((protocol.marker(done.output, protocol.PID) or "", done.returncode))
        return child_of(done, out)

    monkeypatch.setattr(spawn, "child_of", watched)
    said = []
    for keep in ("0", "1"):
        monkeypatch.setenv(children.KEEP_CHILD, keep)
        result = verify_bundle(two_modules, ui=Ui(verbosity=-1))
        said.append([(c.label, c.verdict and (c.verdict.outcome, c.verdict.evidence))
                     for c in result.checks])  # fmt: skip
    fresh, kept = said
    assert kept == fresh and len(kept) == 2
    assert [v and v[0] for _, v in kept] == [Outcome.REPRODUCED_WRONG, Outcome.NOT_REPRODUCED]
    # Two processes for two modules, then one for both; it is gone once verify returns.
    assert [status for _, status in ended] == [0, 0, 0, 0]
    assert len({pid for pid, _ in ended[:2]}) == 2 and len({pid for pid, _ in ended[2:]}) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(int(ended[-1][0]), 0)
