"""End to end on real PyTorch/XLA: ``xla-bugkit collect`` and ``verify`` on torch_xla
programs that fail inside XLA on the CPU (tests/programs/ptxla_*.py).

torch and torch_xla are large (~7 GB with their dependencies) and CI does not install them:
these tests run where torch_xla is installed next to xla-bugkit (``pytest -m frontends``,
with ``PJRT_DEVICE=CPU`` set for the programs here) and are skipped elsewhere.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.programs import (
    PROGRAMS,
    READY_TIMEOUT,
    XLA_BUGKIT,
    Collected,
    clean_env,
    run_collect,
)

pytestmark = [
    pytest.mark.frontends,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch_xla") is None,
        reason="torch_xla is not installed in this environment "
        "(pip install torch==2.9.0 torch_xla==2.9.0)",
    ),
]

CPU = {"PJRT_DEVICE": "CPU"}


def _collect(tmp_path_factory: pytest.TempPathFactory, program: str) -> Collected:
    out = tmp_path_factory.mktemp(program) / f"{program}.zip"
    return run_collect(out, [sys.executable, str(PROGRAMS / f"{program}.py")], env=CPU)


@pytest.fixture(scope="module")
def compile_error(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    return _collect(tmp_path_factory, "ptxla_compile_error")


@pytest.fixture(scope="module")
def compile_crash(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    return _collect(tmp_path_factory, "ptxla_compile_crash")


def _line_of(program: str, text: str) -> int:
    """The line of ``program`` that holds ``text``: the line that made torch_xla compile."""
    lines = (PROGRAMS / f"{program}.py").read_text("utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _graph_reason(module: dict) -> str:  # type: ignore[type-arg]
    return next(r for r in module["reasons"] if r.startswith("PyTorch/XLA was compiling graph"))


def test_the_bare_runtime_error_is_an_xla_compile_error(compile_error: Collected) -> None:
    manifest = compile_error.manifest()
    failure = manifest["failure"]
    assert failure["kind"] == "compile error", compile_error.stderr
    assert failure["headline"] == "RngBitGenerator should be expanded for CPU."
    assert (failure["exception"], failure["status_code"]) == ("RuntimeError", None)
    framework = manifest["framework"]
    assert framework["name"] == "pytorch/xla"
    assert framework["version"] == metadata.version("torch_xla")
    assert framework["version_from"] == "the program"  # the hook's record of its process
    assert re.fullmatch(r"[0-9a-f]{40}", framework["revision"])
    report = compile_error.text("environment.txt")
    assert re.search(rf"^torch_xla: +{re.escape(framework['version'])}$", report, re.M), report
    assert re.search(rf"^torch: +{re.escape(metadata.version('torch'))}$", report, re.M), report
    assert f"python executable: {sys.executable}\n" in report
    assert manifest["data"].startswith("generated inputs (seed 42): PyTorch/XLA")
    # The rerun's settings reached torch_xla: its graph log is in the bundle's log.
    assert "Compiling IR graph hash" in compile_error.text("log.txt")


def test_the_failing_graph_is_chosen_by_its_number(compile_error: Collected) -> None:
    module = compile_error.manifest()["modules"][0]
    assert module["name"].startswith("SyncTensorsGraph.")
    reason = _graph_reason(module)
    line = _line_of("ptxla_compile_error", "eval loss")
    assert f"(compiled for ptxla_compile_error.py:{line})" in reason
    assert f"dumped that graph as {module['label']}.before_optimizations" in reason
    # The training steps' graphs are in the dump too, and not chosen.
    assert len(compile_error.text("other-modules.txt").split()) == 2


def test_the_jaxlib_replay_reproduces_it_so_the_issue_goes_to_openxla(
    compile_error: Collected,
) -> None:
    replay = compile_error.manifest()["modules"][0]["replay"]
    # torch_xla's own replay fails as the program did; jaxlib's, the second opinion, prints
    # the status code torch_xla dropped: "UNIMPLEMENTED: RngBitGenerator ...".
    assert replay["outcome"] == "reproduced: error", compile_error.stderr
    assert replay["under"] == f"torch_xla {metadata.version('torch_xla')}'s own XLA"
    assert replay["second"]["outcome"] == "reproduced: error", compile_error.stderr
    assert "second opinion under jaxlib" in compile_error.stderr
    assert (
        f"The bundle's replay ran under {replay['under']}, the XLA that failed (and under "
        "jaxlib" in compile_error.text("ISSUE.md")
    )
    assert "gh issue create --repo openxla/xla " in compile_error.stderr
    assert compile_error.returncode == 0


def test_verify_replays_it_on_the_maintainers_side(compile_error: Collected) -> None:
    done = subprocess.run([XLA_BUGKIT, "verify", str(compile_error.bundle)], env=clean_env(),
                          capture_output=True, text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the recorded failure reproduces here" in done.stdout


def test_a_check_failure_is_a_compile_crash_of_the_graph_by_its_number(
    compile_crash: Collected,
) -> None:
    manifest = compile_crash.manifest()
    failure = manifest["failure"]
    assert failure["kind"] == "compile crash", compile_crash.stderr
    assert (failure["signal"], failure["site"]) == ("SIGABRT", "ir_array.cc:515")
    module = manifest["modules"][0]
    line = _line_of("ptxla_compile_crash", "weight.t()")
    assert f"(compiled for ptxla_compile_crash.py:{line})" in _graph_reason(module)
    # Graphs before it have the same name: only the number told them apart.
    others = compile_crash.text("other-modules.txt").split()
    assert any(label.endswith(f".{module['name']}") for label in others)


def test_the_crash_goes_to_pytorch_xla_unless_jaxlib_reproduces_it(
    compile_crash: Collected,
) -> None:
    replay = compile_crash.manifest()["modules"][0]["replay"]
    assert replay is not None and replay["second"], compile_crash.stderr
    jaxlib = replay["second"]
    assert jaxlib["under"].startswith("jaxlib ")
    assert "second opinion under jaxlib" in compile_crash.stderr
    # Measured with jaxlib 0.10.2: its replay runs the module to completion, flag and all,
    # so the bug stays PyTorch/XLA's to triage.
    reproduced = jaxlib["outcome"].startswith("reproduced")
    repo = "openxla/xla" if reproduced else "pytorch/xla"
    assert f"gh issue create --repo {repo} " in compile_crash.stderr
    # torch_xla's own replay reproduces it (test_torch_xla_replays_the_crash...).
    assert compile_crash.returncode == 0
    # ISSUE.md follows that tracker's form: pytorch/xla's template, or jax's form that
    # openxla/xla takes.
    body = compile_crash.text("ISSUE.md")
    if reproduced:
        assert "### Description" in body
    else:
        assert "## 🐛 Bug" in body and "## Expected behavior" in body
        # jaxlib's standalone script would show nothing: the way to see it is torch_xla's.
        assert "The failure shows under torch_xla " in body
        assert " - Reproducible on XLA backend [CPU/TPU/CUDA]: CPU" in body
        assert re.search(r"^ - torch_xla version: 2\.\d+\.\d+", body, re.M), body


# --- the replay under torch_xla's own XLA (replay/native.py) -------------------------------


def test_torch_xla_replays_the_crash_that_jaxlib_does_not(compile_crash: Collected) -> None:
    replay = compile_crash.manifest()["modules"][0]["replay"]
    own = f"torch_xla {metadata.version('torch_xla')}'s own XLA"
    assert (replay["outcome"], replay["under"]) == ("reproduced: crash", own), replay
    assert (replay["failure"]["site"], replay["failure"]["signal"]) == (
        "ir_array.cc:515", "SIGABRT"
    )  # fmt: skip
    assert "index.ShapeIsCompatible(shape_)" in replay["evidence"]
    # Measured with jaxlib 0.10.2: the same module, flag and inputs run to completion there.
    assert replay["second"]["outcome"] == "not reproduced", replay
    assert f"reproduced: crash under {own} (generated (seed 42))" in compile_crash.stderr


def _verify(bundle: Path, *, torch_xla: bool) -> subprocess.CompletedProcess[str]:
    # A maintainer's machine without torch_xla: its import is blocked in the verify process
    # (a module set to None in sys.modules is one find_spec does not find).
    block = "" if torch_xla else "sys.modules['torch_xla'] = None; "
    code = f"import sys; {block}from xla_bugkit.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "verify", str(bundle)], env=clean_env(),
                          capture_output=True, text=True, timeout=READY_TIMEOUT)  # fmt: skip


def test_verify_replays_the_crash_under_torch_xla_first(compile_crash: Collected) -> None:
    done = _verify(compile_crash.bundle, torch_xla=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r": reproduced: crash under torch_xla \S+'s own XLA \(same as the "
                     r"reporter's\)", done.stdout), done.stdout  # fmt: skip
    assert "second opinion under jaxlib" in done.stdout
    assert "the recorded failure reproduces here" in done.stdout


def test_verify_without_torch_xla_falls_back_to_jaxlib_and_says_so(
    compile_crash: Collected,
) -> None:
    done = _verify(compile_crash.bundle, torch_xla=False)
    assert "torch_xla is not installed here: the modules are replayed under jaxlib" in done.stderr
    assert "second opinion" not in done.stdout
    # jaxlib's replay runs it to completion (measured), unlike the reporter's.
    assert re.search(r": not reproduced under jaxlib \S+ \(the reporter's replay: reproduced",
                     done.stdout), done.stdout  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
