"""End to end on real TensorFlow: ``xla-bugkit collect`` on a tf.function(jit_compile=True)
program that fails inside XLA, and the TensorFlow bug that keeps the snapshot flag out.

TensorFlow is large (~1.6 GB) and CI does not install it: these tests run where it is
installed next to xla-bugkit (``pytest -m frontends``) and are skipped elsewhere.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, Collected, clean_env, run_collect
from xla_bugkit.errors import ExitCode

pytestmark = [
    pytest.mark.frontends,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None,
        reason="tensorflow is not installed in this environment (pip install tensorflow-cpu)",
    ),
]

# A correct jit_compile program: only the dump flags can make it fail.
CORRECT = """
import tensorflow as tf

@tf.function(jit_compile=True)
def f(x):
    return tf.reduce_sum(tf.tanh(x) * 2.0)

print(f(tf.ones([4])))
"""


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    out = tmp_path_factory.mktemp("tf") / "tf.zip"
    return run_collect(out, [sys.executable, str(PROGRAMS / "tf_runtime_error.py")])


def test_the_failing_function_is_bundled_with_its_framework(collected: Collected) -> None:
    manifest = collected.manifest()
    assert manifest["framework"]["name"] == "tensorflow", collected.stderr
    assert manifest["framework"]["version"]
    assert manifest["framework"]["version_from"] == "the program"  # the hook's record of it
    assert manifest["framework"]["detected_from"] == "dump module names"
    report = collected.text("environment.txt")
    version = re.escape(manifest["framework"]["version"])
    assert re.search(rf"^tensorflow: +{version}$", report, re.M), report
    assert f"python executable: {sys.executable}\n" in report
    failure = manifest["failure"]
    assert failure["kind"] == "runtime error"
    assert failure["status_code"] == "UNIMPLEMENTED"
    assert failure["function"].startswith("__inference_f_")
    module = manifest["modules"][0]
    assert module["name"].startswith(f"a{failure['function'][1:]}__XlaMustCompile_true")
    assert any(failure["function"] in reason for reason in module["reasons"])


def test_the_run_had_no_snapshot_flag_and_the_hook_recorded_the_inputs(
    collected: Collected,
) -> None:
    manifest = collected.manifest()
    snapshots = [f["path"] for f in manifest["files"] if ".snapshot." in f["path"]]
    assert [s.split(".snapshot.")[1] for s in snapshots] == ["recorded-1.pb"], snapshots
    assert manifest["data"] == (
        "real inputs (recorded by the capture hook: TensorFlow writes no snapshot on CPU)"
    )
    assert manifest["modules"][0]["replay"]["inputs"] == "snapshot"
    assert "--xla_dump_hlo_snapshots is left out for TensorFlow" in collected.stderr
    # TF_CPP_VMODULE=xla_ops=1 reached TensorFlow: it logged the function it launched.
    assert "XlaLocalLaunchOpBase::Compute __inference_f_" in collected.text("log.txt")


def test_the_jaxlib_replay_is_labelled_and_the_issue_goes_to_its_tracker(
    collected: Collected,
) -> None:
    manifest = collected.manifest()
    replay = manifest["modules"][0]["replay"]
    assert replay is not None and replay["outcome"], collected.stderr
    issue = collected.text("ISSUE.md")
    assert "Framework: TensorFlow" in issue
    assert "not TensorFlow's own XLA" in issue
    assert "not TensorFlow's own XLA" in collected.stderr
    # A plain jaxlib replay that reproduces it makes it XLA's bug; else TensorFlow's.
    reproduced = replay["outcome"].startswith("reproduced")
    repo = "openxla/xla" if reproduced else "tensorflow/tensorflow"
    assert f"gh issue create --repo {repo} " in collected.stderr
    assert collected.returncode == (0 if reproduced else 3)


def test_tensorflow_still_crashes_with_the_snapshot_flag(tmp_path: Path) -> None:
    """The reason for leaving the flag out; when TensorFlow fixes it, this fails, and the
    flag can come back for TensorFlow versions with the fix."""
    flags = f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots"
    done = subprocess.run([sys.executable, "-c", CORRECT], env=clean_env(flags),
                          capture_output=True, text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert done.returncode == -signal.SIGSEGV, done.stderr[-2000:]
    without = subprocess.run([sys.executable, "-c", CORRECT], env=clean_env(),
                             capture_output=True, text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert without.returncode == 0, without.stderr[-2000:]


def test_a_functions_real_inputs_and_captured_variable_are_replayed(tmp_path: Path) -> None:
    # TensorFlow's module takes (x, the captured variable, the captured constant); the hook
    # saved their values as the call found them, and the replay ran on exactly those.
    done = run_collect(
        tmp_path / "in.zip", [sys.executable, str(PROGRAMS / "tf_recorded_inputs.py")], "--always"
    )
    assert done.returncode == ExitCode.NO_FAILURE, done.stderr  # the program is right
    manifest = done.manifest()
    assert manifest["data"].startswith("real inputs (recorded by the capture hook"), done.stderr
    replay = manifest["modules"][0]["replay"]
    assert replay["inputs"] == "snapshot" and replay["outcome"] == "not reproduced", replay
    x, offset, matrix = done.recorded_inputs(manifest["modules"][0]["label"])
    assert x.shape == (16385, 3) and x[:, 0].tolist() == list(range(16385))
    assert offset.tolist() == [0.0, 0.0, 0.0] and matrix.tolist() == np.eye(3).tolist()
