"""``verify`` of a crash bundle whose run was on another build of XLA: the CHECK the replay
aborts on here is the run's, printed at another line and under another path.

No test may download another jaxlib, so the other build is played by the bundle: its
recorded failure is rewritten to what the run's output would have been had its XLA printed
the CHECK elsewhere (as ``classify`` reads that output), and the replay runs here.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.cli.main import main
from xla_bugkit.failure.classify import classify

pytestmark = pytest.mark.slow  # a real crash, collected and replayed end to end

CHECK = "Check failed: const_instr == nullptr "


@pytest.fixture(scope="module")
def crash_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("builds") / "crash.zip"
    collected = run_collect(out, [sys.executable, str(PROGRAMS / "compile_crash.py")], "-q")
    assert collected.returncode == 0, collected.stderr
    assert collected.manifest()["failure"]["site"] == "buffer_assignment_util.cc:46"
    return out


def as_printed_by(bundle: Path, dest: Path, fatal_line: str) -> Path:
    """A copy of ``bundle`` whose run printed ``fatal_line`` for its CHECK."""
    with zipfile.ZipFile(bundle) as zin, zipfile.ZipFile(dest, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "manifest.json":
                manifest = json.loads(data)
                recorded = classify(fatal_line, exit_status=-6)
                manifest["failure"] |= {
                    "headline": recorded.headline,
                    "signature": recorded.signature,
                    "site": recorded.site,
                }
                data = json.dumps(manifest, indent=1).encode()
            zout.writestr(name, data)
    return dest


# What an older or newer XLA prints for the CHECK jaxlib 0.10.2 prints at line 46.
OTHER_BUILDS = {
    "line 48, absl, a checkout's path": "F0000 00:00:1733490011.123456   12345 "
    f"external/xla/xla/service/buffer_assignment_util.cc:48] {CHECK}",
    "line 10046 under /proc/self/cwd": "F1206 10:11:12.345678 67890 "
    f"/proc/self/cwd/external/xla/xla/service/buffer_assignment_util.cc:10046] {CHECK}",
    "line 39, Bazel modules' path": "F0000 00:00:1790000000.000001 4242 "
    f"external/xla+/xla/service/buffer_assignment_util.cc:39] {CHECK}",
}


@pytest.mark.parametrize("fatal_line", OTHER_BUILDS.values(), ids=OTHER_BUILDS.keys())
def test_the_same_check_at_another_line_reproduces(
    crash_bundle: Path, tmp_path: Path, fatal_line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = as_printed_by(crash_bundle, tmp_path / "other.zip", fatal_line)
    assert main(["verify", "--json", str(bundle)]) == 0
    result = json.loads(capsys.readouterr().out)
    verdict = result["modules"][0]["verdict"]
    assert result["reproduced"], verdict
    assert verdict["outcome"] == "reproduced: crash"
    # The evidence quotes the run's line where it was spelled otherwise.
    assert (
        "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr"
        in (verdict["evidence"])
    )
    assert "the run showed it as: buffer_assignment_util.cc:" in verdict["evidence"]


def test_another_check_in_the_same_file_does_not(
    crash_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "F0000 00:00:1733490011.123456   12345 buffer_assignment_util.cc:46] Check failed: "
    bundle = as_printed_by(crash_bundle, tmp_path / "other.zip", f"{other}instr->IsRoot() ")
    assert main(["verify", "--json", str(bundle)]) == 3
    result = json.loads(capsys.readouterr().out)
    verdict = result["modules"][0]["verdict"]
    assert verdict["outcome"] == "not reproduced"
    assert "failed differently while compiling" in verdict["evidence"]
