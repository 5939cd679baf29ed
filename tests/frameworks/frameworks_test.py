"""Frameworks: detection, the rerun's environment, their error formats, names, trackers.

The excerpts in data/ are real output of tensorflow-cpu 2.21 and of torch_xla 2.9 on CPU
(each file says what produced it; ptxla_test.py runs the same programs where torch_xla is
installed). The dated fatal line is the format quoted from a real run in the project's
issue on TensorFlow and PyTorch/XLA.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from xla_bugkit import frameworks
from xla_bugkit.bundle import framework_text
from xla_bugkit.bundle.manifest import validate
from xla_bugkit.choose import dumps
from xla_bugkit.choose.selection import select
from xla_bugkit.errors import BadBundleError
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Kind, Phase, classify
from xla_bugkit.frameworks import Framework
from xla_bugkit.run import adapt
from xla_bugkit.run.rerun import child_env

DATA = Path(__file__).resolve().parent / "data"
TF_FUNCTION_MODULE = (
    "a_inference_f_23__XlaMustCompile_true_config_proto_13561319589895757934_"
    "executor_type_11160318154034397263_.2"
)
# Names as the issue quotes them from real runs.
KERAS_MODULE = "a_inference_one_step_on_data_240__.5"
TF_CLUSTER_MODULE = "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false"
TORCH_MODULE = "SyncTensorsGraph.8"
TORCH_FATAL = (
    "2026-12-02 17:51:18.336598: F external/xla/xla/map_util.h:50] Check failed: "
    "it != m.end() key not found: 3"
)


def real(name: str) -> str:
    """A captured excerpt without its header (the ``# `` lines saying what produced it)."""
    lines = (DATA / name).read_text("utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")) + "\n"


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import tensorflow as tf\n", Framework.TENSORFLOW),
        ("from tensorflow import keras\n", Framework.TENSORFLOW),
        ("import torch\nimport torch_xla.core.xla_model as xm\n", Framework.PYTORCH_XLA),
        ("import jax\n", Framework.JAX),
        # A JAX program that reads its data with TensorFlow is JAX's: the safe default.
        ("import tensorflow as tf\nimport jax.numpy as jnp\n", Framework.JAX),
        ("import keras\n", None),  # its backend may be JAX, TensorFlow or torch
        ("import numpy\n# import tensorflow\n", None),
    ],
)
def test_imports_tell_the_framework(source: str, expected: Framework | None) -> None:
    assert frameworks.from_imports(source) is expected


def test_the_command_script_is_read_for_its_imports(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import os\nimport tensorflow as tf\n", "utf-8")
    assert frameworks.from_command(["python3", "-u", "train.py"], tmp_path) is Framework.TENSORFLOW
    assert frameworks.from_command(["python", "-X", "dev", "train.py"], tmp_path) is not None
    assert frameworks.from_command(["python", "-c", "import torch_xla"]) is Framework.PYTORCH_XLA
    # No script to read: unsure, so JAX's settings stay.
    assert frameworks.from_command(["python", "-m", "trainer"], tmp_path) is None
    assert frameworks.from_command(["bash", "run.sh"], tmp_path) is None
    assert frameworks.from_command(["python", "missing.py"], tmp_path) is None


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([TF_FUNCTION_MODULE], Framework.TENSORFLOW),
        ([KERAS_MODULE], Framework.TENSORFLOW),
        ([TF_CLUSTER_MODULE], Framework.TENSORFLOW),
        ([TORCH_MODULE, "SyncTensorsGraph.12"], Framework.PYTORCH_XLA),
        (["jit_train_step", "jit__lambda"], Framework.JAX),
        (["jit_convert_element_type", TF_FUNCTION_MODULE], Framework.TENSORFLOW),
        (["main"], None),
    ],
)
def test_dump_names_tell_the_framework(names: list[str], expected: Framework | None) -> None:
    assert frameworks.from_module_names(names) is expected


def test_real_tensorflow_output_and_dump_names_tell_tensorflow(tmp_path: Path) -> None:
    found = frameworks.detect(["sh", "run.sh"], real("tf_unimplemented.log"), [])
    assert found == frameworks.Detection(Framework.TENSORFLOW, "the program's output")
    index = _dump(tmp_path, real("tf_dump_names.txt").split())
    found = frameworks.detect([], "", (m.name for m in index.modules))
    assert found == frameworks.Detection(Framework.TENSORFLOW, "dump module names")
    assert frameworks.detect(["sh"], "", []) is None


# --- the rerun's environment -------------------------------------------------------------


def test_tensorflow_runs_without_the_snapshot_flag_and_logs_its_launches(tmp_path: Path) -> None:
    base = {"XLA_FLAGS": "--xla_dump_hlo_snapshots --xla_cpu_use_thunk_runtime=true",
            "TF_CPP_VMODULE": "gpu_compiler=2,dump=3"}  # fmt: skip
    env, merged = child_env(base, tmp_path, framework=Framework.TENSORFLOW)
    assert adapt.SNAPSHOT_FLAG not in env["XLA_FLAGS"]
    assert "--xla_cpu_use_thunk_runtime=true" in env["XLA_FLAGS"]
    assert f"--xla_dump_to={tmp_path}" in env["XLA_FLAGS"]
    assert env["XLA_FLAGS"] == merged.value
    # The user's entries kept, in order, with their higher level; ours added.
    assert env["TF_CPP_VMODULE"] == "gpu_compiler=2,dump=3,xla_ops=1"
    assert any("left out for TensorFlow" in note for note in merged.notes)


def test_jax_and_unknown_programs_keep_the_snapshot_flag(tmp_path: Path) -> None:
    for framework in (None, Framework.JAX):
        env, _ = child_env({}, tmp_path, framework=framework)
        assert adapt.SNAPSHOT_FLAG in env["XLA_FLAGS"]
        assert "xla_ops" not in env["TF_CPP_VMODULE"]
        assert "PT_XLA_DEBUG_LEVEL" not in env


def test_pytorch_xla_gets_its_debug_level_and_info_logs(tmp_path: Path) -> None:
    env, merged = child_env({}, tmp_path, framework=Framework.PYTORCH_XLA)
    assert env["PT_XLA_DEBUG_LEVEL"] == "1"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert env["TF_CPP_VMODULE"] == "dump=1,xla_graph_executor=3"
    # No HLO snapshots on CPU under PyTorch/XLA, but the flag does no harm: it stays.
    assert adapt.SNAPSHOT_FLAG in env["XLA_FLAGS"] and not merged.notes
    mine = {"PT_XLA_DEBUG_LEVEL": "2", "TF_CPP_MIN_LOG_LEVEL": "1",
            "TF_CPP_VMODULE": "xla_graph_executor=5,pjrt_computation_client=1"}  # fmt: skip
    env, _ = child_env(mine, tmp_path, framework=Framework.PYTORCH_XLA)
    assert (env["PT_XLA_DEBUG_LEVEL"], env["TF_CPP_MIN_LOG_LEVEL"]) == ("2", "1")
    assert env["TF_CPP_VMODULE"] == "xla_graph_executor=5,pjrt_computation_client=1,dump=1"


def _lines_hidden(pattern: re.Pattern[bytes] | None, text: str) -> list[str]:
    assert pattern is not None
    return [line for line in text.splitlines() if pattern.match(line.encode())]


def test_the_terminal_does_not_show_what_only_collect_made_pytorch_xla_print() -> None:
    """run.log keeps every line; the terminal shows what the program shows by itself."""
    log = real("ptxla_compile_error.log")
    also = adapt.hidden_on_terminal({}, Framework.PYTORCH_XLA)
    hide = xla_log.hidden_on_terminal({}, all_info=False, also=also)
    hidden = _lines_hidden(hide, log)
    assert any(line.startswith("Compilation Analysis:   Graph Hash: ") for line in hidden)
    assert any(line.startswith("Post Compilation Analysis: ") for line in hidden)
    assert any("Compiling IR graph hash" in line for line in hidden)
    assert any("] Dumping module_0002." in line for line in hidden)
    shown = [line for line in log.splitlines() if line and line not in hidden]
    assert "step 0 loss 0.26241540908813477" in shown
    assert "RuntimeError: RngBitGenerator should be expanded for CPU." in shown
    assert not any(re.match(r"\d{4}-\d\d-\d\d .*: I ", line) for line in shown)
    # What the user asked for stays on the terminal.
    mine = {"PT_XLA_DEBUG_LEVEL": "1", "TF_CPP_MIN_LOG_LEVEL": "0"}
    assert adapt.hidden_on_terminal(mine, Framework.PYTORCH_XLA) is None
    assert adapt.hidden_on_terminal({}, Framework.TENSORFLOW) is None


# --- error formats -----------------------------------------------------------------------


def test_tensorflow_unimplemented_is_an_xla_error_with_its_function() -> None:
    f = classify(real("tf_unimplemented.log"), exit_status=1)
    assert f.kind is Kind.RUNTIME_ERROR
    assert f.status_code == "UNIMPLEMENTED"
    assert f.function == "__inference_f_23"
    # What XLA said, without TensorFlow's [Op:...]: a jaxlib replay prints the same line.
    assert f.headline == "UNIMPLEMENTED: RngBitGenerator should be expanded for CPU."
    assert f.exception == "tensorflow.python.framework.errors_impl.UnimplementedError"


def test_tensorflow_internal_error_is_an_xla_error() -> None:
    f = classify(real("tf_internal.log"), exit_status=1)
    assert (f.kind, f.status_code, f.function) == (
        Kind.RUNTIME_ERROR, "INTERNAL", "__inference_f_12",
    )  # fmt: skip
    assert f.headline.startswith("INTERNAL: Too many extra compilation parts")
    assert "[Op:" not in f.headline


def test_a_dated_fatal_line_gives_its_site_and_condition() -> None:
    output = f"I1202 17:51:18.1 1 x.cc:1] start\n{TORCH_FATAL}\n*** Begin stack trace ***\n"
    f = classify(output, exit_status=-6)
    assert f.kind in (Kind.CRASH, Kind.COMPILE_CRASH)
    assert f.site == "map_util.h:50"
    assert f.headline == "map_util.h:50] Check failed: it != m.end() key not found: 3"


def test_a_runtime_error_carrying_an_xla_status_is_not_a_python_error() -> None:
    output = "Traceback (most recent call last):\nRuntimeError: Bad StatusOr access: INTERNAL: x\n"
    f = classify(output, exit_status=1)
    assert f.kind is Kind.RUNTIME_ERROR and f.status_code == "INTERNAL"
    # XLA's status as jaxlib prints it, unwrapped: a replay's line matches it.
    assert (f.headline, f.exception) == ("INTERNAL: x", "RuntimeError")


def _traceback_of(log: str) -> str:
    return log[log.index("Traceback (most recent call last):") :]


def test_torch_xlas_bare_runtime_error_while_compiling_is_an_xla_compile_error() -> None:
    """torch_xla 2.9 raises XLA's UNIMPLEMENTED as a RuntimeError with no code, from the
    user's .item(): the graph log says XLA was compiling when it came."""
    log = real("ptxla_compile_error.log")
    f = classify(log, exit_status=1)
    assert (f.kind, f.phase) == (Kind.COMPILE_ERROR, Phase.COMPILE)
    assert f.headline == "RngBitGenerator should be expanded for CPU."
    assert (f.exception, f.status_code) == ("RuntimeError", None)
    # The replay under jaxlib prints the status code; it is the same bug.
    replayed = classify(
        "jax.errors.JaxRuntimeError: UNIMPLEMENTED: RngBitGenerator should be expanded for "
        "CPU.\n", exit_status=1, phase=Phase.COMPILE,
    )  # fmt: skip
    assert replayed.kind is Kind.COMPILE_ERROR and f.same_bug(replayed)
    # PT_XLA_DEBUG_LEVEL's analysis alone tells it too (a compile with no post analysis).
    without_executor = "".join(
        line for line in log.splitlines(keepends=True) if "xla_graph_executor" not in line
    )
    assert classify(without_executor, exit_status=1).kind is Kind.COMPILE_ERROR


def test_the_same_runtime_error_after_every_graph_finished_is_the_programs() -> None:
    log = real("ptxla_compile_error.log")
    # The run up to the evaluation's compile: every graph compiled and ran.
    before_eval = log[: log.index("most likely user code trying to access")]
    before_eval = before_eval[: before_eval.rindex("\nCompilation Analysis: ====")]
    f = classify(before_eval + "\n" + _traceback_of(log), exit_status=1)
    assert f.kind is Kind.EXIT
    assert f.headline == "RuntimeError: RngBitGenerator should be expanded for CPU."
    # Without any of PyTorch/XLA's log lines, nothing tells either.
    assert classify(_traceback_of(log), exit_status=1).kind is Kind.EXIT


def test_a_real_pytorch_xla_check_failure_is_a_compile_crash() -> None:
    f = classify(real("ptxla_compile_crash.log"), exit_status=-6)
    assert (f.kind, f.signal, f.site) == (Kind.COMPILE_CRASH, "SIGABRT", "ir_array.cc:515")
    assert f.headline.startswith("ir_array.cc:515] Check failed: index.ShapeIsCompatible(shape_)")


# --- names and selection -----------------------------------------------------------------


def test_tensorflow_functions_map_to_their_modules() -> None:
    assert frameworks.runs_function(TF_FUNCTION_MODULE, "__inference_f_23")
    assert not frameworks.runs_function(TF_FUNCTION_MODULE, "__inference_f_2")
    assert frameworks.runs_function(KERAS_MODULE, "__inference_one_step_on_data_240")
    assert not frameworks.runs_function("jit_f", "f")


def test_pytorch_xla_names_are_never_evidence() -> None:
    assert frameworks.name_is_shared(TORCH_MODULE)
    assert not frameworks.name_is_shared(TF_FUNCTION_MODULE)


def _dump(root: Path, names: list[str]) -> dumps.DumpIndex:
    for name in names:
        (root / name).write_bytes(b"")
    return dumps.index(root)


def test_the_failing_tensorflow_function_is_the_module_chosen(tmp_path: Path) -> None:
    names = real("tf_dump_names.txt").split()
    # A Keras step compiled after it, as a training script would: the newer module.
    index = _dump(tmp_path, [*names, f"module_0001.{KERAS_MODULE}.before_optimizations.txt"])
    output = real("tf_unimplemented.log")
    chosen = select(index, classify(output, exit_status=1), output).chosen
    assert chosen[0].module.name == TF_FUNCTION_MODULE
    assert any("__inference_f_23" in reason for reason in chosen[0].reasons)


@pytest.mark.parametrize(
    ("program", "exit_status", "module"),
    [
        ("ptxla_compile_error", 1, "module_0002.SyncTensorsGraph.96"),
        ("ptxla_compile_crash", -6, "module_0004.SyncTensorsGraph.11"),
    ],
)
def test_the_graph_pytorch_xla_was_compiling_is_the_module_chosen(
    tmp_path: Path, program: str, exit_status: int, module: str
) -> None:
    index = _dump(tmp_path, real(f"{program}_dump_names.txt").split())
    names = [m.name for m in index.modules]
    output = real(f"{program}.log")
    chosen = select(index, classify(output, exit_status=exit_status), output).chosen
    assert chosen[0].module.label == module
    # Its name is no evidence: the crash's module shares it with two graphs before it.
    assert names.count(chosen[0].module.name) == (3 if "crash" in program else 1)
    graph = next(r for r in chosen[0].reasons if r.startswith("PyTorch/XLA was compiling graph"))
    assert f"(compiled for {program}.py:" in graph
    assert f"XLA dumped that graph as {module}.before_optimizations.txt" in graph


# --- where reports go, and what the manifest says ----------------------------------------


@pytest.mark.parametrize(
    ("framework", "reproduced", "repo"),
    [
        (Framework.TENSORFLOW, False, "tensorflow/tensorflow"),
        (Framework.TENSORFLOW, True, "openxla/xla"),
        (Framework.PYTORCH_XLA, False, "pytorch/xla"),
        (Framework.PYTORCH_XLA, True, "openxla/xla"),
        (Framework.JAX, True, "jax-ml/jax"),
        (None, False, "jax-ml/jax"),
    ],
)
def test_issue_target(framework: Framework | None, reproduced: bool, repo: str) -> None:
    assert frameworks.issue_repo(framework, reproduced_under_jaxlib=reproduced) == repo


def test_a_jaxlib_replay_of_a_tensorflow_module_says_so() -> None:
    found = frameworks.FrameworkInfo(Framework.TENSORFLOW, "2.21.0", "v2.21.0-rc1", "x")
    label = framework_text.replay_label(found)
    assert label is not None and label.endswith("not TensorFlow's own XLA")
    assert "under jaxlib" in (framework_text.describe(found, replayed=True) or "")
    jax = frameworks.FrameworkInfo(Framework.JAX, "0.10.2", None, "x")
    assert framework_text.replay_label(jax) is None and framework_text.describe(jax, True) is None


def test_inputs_are_called_generated_when_the_framework_records_none() -> None:
    tf = frameworks.FrameworkInfo(Framework.TENSORFLOW, None, None, "x")
    none = "no real inputs: XLA recorded no execution of the chosen modules"
    assert framework_text.inputs_text(tf, none).startswith("generated inputs")
    assert framework_text.inputs_text(None, none) == none
    assert framework_text.inputs_text(tf, "real inputs (snapshots)") == "real inputs (snapshots)"


def test_this_installs_jaxlib_version_and_revision() -> None:
    found = frameworks.info(frameworks.Detection(Framework.JAX, "dump module names"))
    assert found.version and found.revision and len(found.revision) == 40
    assert found.to_json()["name"] == "jax"
    assert found.to_json()["version_from"] == frameworks.HERE  # no record of the program's


def test_the_version_is_the_one_the_programs_interpreter_recorded() -> None:
    """The program ran under another interpreter (a venv of its own) than xla-bugkit, which
    may not have the framework at all (TensorFlow is not installed here)."""
    recorded = {"python_executable": "/venv/bin/python", "tensorflow": "2.21.0",
                "torch_xla": "2.9.0", "jaxlib": "0.4.38"}  # fmt: skip
    expected = {Framework.TENSORFLOW: "2.21.0", Framework.PYTORCH_XLA: "2.9.0",
                Framework.JAX: "0.4.38"}  # fmt: skip
    for framework, version in expected.items():
        found = frameworks.info(frameworks.Detection(framework, "dump module names"), recorded)
        assert (found.version, found.version_from) == (version, frameworks.PROGRAM)
        assert found.to_json()["version_from"] == "the program"
    # This jaxlib's revision is not the recorded release's: it is left out, not misstated.
    assert found.revision is None
    same = {"jaxlib": frameworks.installed_version(Framework.JAX) or ""}
    jax = frameworks.info(frameworks.Detection(Framework.JAX, "x"), same)
    assert jax.version_from == frameworks.PROGRAM and jax.revision


def test_a_version_from_xla_bugkits_environment_is_said_so() -> None:
    tf = frameworks.Detection(Framework.TENSORFLOW, "dump module names")
    unknown = frameworks.info(tf, {"python_executable": "/venv/bin/python"})
    if frameworks.installed_version(Framework.TENSORFLOW) is None:  # as in CI
        assert (unknown.version, unknown.version_from) == (None, "")
        assert "version_from" not in unknown.to_json()
    here = frameworks.FrameworkInfo(Framework.TENSORFLOW, "2.20.0", None, "x", frameworks.HERE)
    said = framework_text.describe(here, replayed=False) or ""
    assert said.startswith("Framework: TensorFlow 2.20.0 as installed where xla-bugkit ran "
                           "(the program's own was not recorded), detected from x.")  # fmt: skip
    theirs = frameworks.FrameworkInfo(Framework.TENSORFLOW, "2.21.0", None, "x", frameworks.PROGRAM)
    assert (
        framework_text.describe(theirs, replayed=False)
        == "Framework: TensorFlow 2.21.0, detected from x."
    )


def _manifest() -> dict[str, object]:
    return {
        "schema": 1, "tool": "xla-bugkit", "title": "t", "created": "c", "versions": {},
        "command": ["python", "x.py"], "xla_flags": [], "exit_status": 1,
        "failure": {"kind": "runtime error", "headline": "h", "signature": "h",
                    "function": "__inference_f_23"},
        "guess": False, "modules": [], "other_modules": 0, "data": "d", "notes": [],
        "files": [],
    }  # fmt: skip


def test_the_framework_record_is_optional_and_checked() -> None:
    old = _manifest()  # bundles of earlier versions have none
    assert validate(copy.deepcopy(old)) == old
    record = {"name": "tensorflow", "version": "2.21.0", "revision": None,
              "detected_from": "dump module names"}  # fmt: skip
    assert validate({**old, "framework": record})["framework"] == record  # type: ignore[typeddict-item]
    with pytest.raises(BadBundleError, match="the framework record"):
        validate({**old, "framework": {**record, "version": 2}})
    mine = {**record, "version_from": "the program"}
    assert validate({**old, "framework": mine})["framework"] == mine  # type: ignore[typeddict-item]
    with pytest.raises(BadBundleError, match="'version_from' must be a string"):
        validate({**old, "framework": {**record, "version_from": 1}})
    with pytest.raises(BadBundleError, match="function"):
        validate({**old, "failure": {**old["failure"], "function": 3}})  # type: ignore[dict-item]
