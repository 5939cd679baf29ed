"""End to end: ``xla-bugkit shrink`` on bundles of real XLA bugs (jaxlib 0.10.2, CPU), and
``verify`` on what it writes."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.programs import READY_TIMEOUT, Collected, clean_env, run_collect
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode

from .conftest import SPLIT_COUNT, USER_FLAGS

pytestmark = pytest.mark.slow  # real jax programs, many probes


def _manifest(bundle: Path) -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(bundle) as z:
        return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]


def _shrink(bundle: Path, out: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["shrink", str(bundle), "-o", str(out), "--json", *extra])
    return code, _manifest(out)["shrink"]


@pytest.fixture(scope="module")
def log_exp(
    shrink_bundles: Callable[..., Collected], tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("log-exp") / "shrunk.zip"
    code = main(["shrink", str(shrink_bundles("log_exp_big").bundle), "-o", str(out)])
    return code, out


def test_a_big_wrong_result_module_shrinks_below_a_tenth(log_exp: tuple[int, Path]) -> None:
    code, out = log_exp
    assert code == ExitCode.OK
    record = _manifest(out)["shrink"]
    assert record["instructions_before"] >= 300
    assert record["instructions_after"] <= record["instructions_before"] // 10
    assert record["culprit"] == {"pass": "algsimp", "how": "disabling-hides"}
    assert "--xla_disable_hlo_passes=algsimp" in record["workarounds"]


def test_the_shrunk_module_fails_the_same_way_through_verify(
    log_exp: tuple[int, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = log_exp
    manifest = _manifest(out)
    labels = [m["label"] for m in manifest["modules"]]
    shrunk = next(label for label in labels if label.endswith(".shrunk"))
    assert labels.index(shrunk) == len(labels) - 1  # the original modules stay
    capsys.readouterr()
    assert main(["verify", "--json", str(out)]) == ExitCode.OK
    verdicts = {m["label"]: m["verdict"] for m in json.loads(capsys.readouterr().out)["modules"]}
    assert verdicts[shrunk]["outcome"] == "reproduced: wrong result"
    with zipfile.ZipFile(out) as z:
        issue = z.read("ISSUE.md").decode()
    assert "#### Shrunk reproducer" in issue
    assert "log(exp" in issue.replace(".1", "").replace(" ", "")
    # The report names the shrunk bundle, the one to attach and verify, not the original.
    assert "xla-bugkit verify shrunk.zip" in issue and "attach shrunk.zip" in issue


def test_a_flag_crash_names_the_flag_and_is_module_independent(
    shrink_bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    bundle = shrink_bundles("flag_crash", xla_flags=USER_FLAGS).bundle
    code, record = _shrink(bundle, tmp_path / "out.zip")
    assert code == ExitCode.OK
    assert record["needed_flags"] == [SPLIT_COUNT]
    assert record["module_independent"] is True
    assert record["culprit"] == {"pass": None, "how": "not-a-pass"}
    assert main(["verify", str(tmp_path / "out.zip")]) == ExitCode.OK


def test_a_crash_that_needs_a_pass_disabled_says_so_and_names_the_flags_it_does_not_need(
    shrink_bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    no_copies = "--xla_disable_hlo_passes=copy-insertion"
    flags = f"--xla_cpu_enable_fast_math=false {no_copies}"
    bundle = shrink_bundles("split_without_copies", xla_flags=flags).bundle
    out = tmp_path / "out.zip"
    # The flags and the passes are what this is about: the module stage is left out.
    code, record = _shrink(bundle, out, "--only", "flags,passes", "--probe-timeout", "60")
    assert code == ExitCode.OK
    assert record["needed_flags"] == [no_copies]
    assert "--xla_cpu_enable_fast_math=false" in record["unneeded_flags"]
    # Every pass disabled disables copy insertion too: that probe says nothing here.
    assert record["culprit"] == {"pass": "copy-insertion", "how": "needs-disabled"}
    with zipfile.ZipFile(out) as z:
        issue = z.read("ISSUE.md").decode()
    assert "it fails only with HLO pass copy-insertion disabled" in issue
    assert "not an HLO pass" not in issue


def test_only_the_module_stage_claims_no_flag_is_needed(
    shrink_bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    bundle = shrink_bundles("flag_crash", xla_flags=USER_FLAGS).bundle
    code, record = _shrink(bundle, tmp_path / "out.zip", "--only", "module")
    assert code == ExitCode.OK
    # The flags were never tried one by one: none is reported as needed, nor as not needed,
    # in the record, the findings or ISSUE.md; each says the flags stage did not run.
    assert record["needed_flags"] == [] and record["module_independent"] is False
    assert any("XLA flags were all kept, untested" in n for n in record["notes"])
    assert (record["stages"], record["skipped"]) == (["module"], ["flags", "passes"])
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        issue = z.read("ISSUE.md").decode()
    assert "- not run (--only): the flags and passes stages" in issue
    assert "recorded flags" not in issue and "- needs " not in issue


def test_a_spent_budget_still_writes_the_best_so_far(
    shrink_bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    bundle = shrink_bundles("flag_crash", xla_flags=USER_FLAGS).bundle
    code, record = _shrink(bundle, tmp_path / "out.zip", "--max-probes", "2")
    assert code == ExitCode.OK
    assert record["probes"] == 2
    assert any("budget exhausted" in n for n in record["notes"])


def test_a_dump_folder_is_shrunk_into_a_bundle(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_proto {SPLIT_COUNT}"
    program = Path(__file__).resolve().parent / "programs" / "flag_crash.py"
    subprocess.run([sys.executable, str(program)], env=clean_env(flags), capture_output=True,
                   timeout=READY_TIMEOUT, check=False)  # fmt: skip
    out = tmp_path / "dump.zip"
    assert main(["shrink", str(dump), "-o", str(out)]) == ExitCode.OK
    record = _manifest(out)["shrink"]
    assert record["needed_flags"] == [SPLIT_COUNT]
    assert main(["verify", str(out)]) == ExitCode.OK


def test_collect_shrink_adds_the_shrunk_module(tmp_path: Path) -> None:
    program = Path(__file__).resolve().parent / "programs" / "flag_crash.py"
    out = tmp_path / "bug.zip"
    done = run_collect(out, [sys.executable, str(program)], "--shrink", "5m",
                       cwd=tmp_path, xla_flags=USER_FLAGS)  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    manifest = _manifest(out)
    assert manifest["shrink"]["needed_flags"] == [SPLIT_COUNT]
    assert manifest["modules"][-1]["label"].endswith(".shrunk")
    assert not list(tmp_path.glob(".*"))  # no partial bundle or checkpoint left behind


def test_a_module_that_does_not_fail_is_not_shrunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = Path(__file__).resolve().parents[1] / "programs" / "success.py"
    bundle = tmp_path / "ok.zip"
    run_collect(bundle, [sys.executable, str(program)], "--always", cwd=tmp_path)
    assert main(["shrink", str(bundle), "-o", str(tmp_path / "out.zip")]) == 3
    assert "the unmodified module does not fail here" in capsys.readouterr().err
    assert not (tmp_path / "out.zip").exists()


@pytest.fixture(scope="module")
def compile_crash(
    shrink_bundles: Callable[..., Collected], tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, Path]:
    # tests/programs/compile_crash.py: with every HLO pass disabled (a flag the program sets
    # itself), emitting the constants of jax.random's threefry loop fails a CHECK.
    bundle = shrink_bundles("../../programs/compile_crash").bundle
    out = tmp_path_factory.mktemp("compile-crash") / "out.zip"
    # A probe takes about a second; some candidates (a constant as the whole module, with
    # every pass disabled) hang in XLA, and each costs its full timeout: generous, not huge.
    argv = ["shrink", str(bundle), "-o", str(out), "--probe-timeout", "60", "--budget", "60m"]
    return main(argv), out


def test_a_crash_inside_called_computations_is_reached(compile_crash: tuple[int, Path]) -> None:
    code, out = compile_crash
    assert code == ExitCode.OK
    record = _manifest(out)["shrink"]
    assert record["needed_flags"] == ["--xla_disable_all_hlo_passes=true"]
    assert record["culprit"] == {"pass": None, "how": "not-a-pass"}
    # The crash sits in a while loop three calls deep (266 instructions, 9 computations):
    # the calls were inlined and the loop's body emptied. Entry-only cuts stopped at 105.
    assert record["instructions_after"] <= record["instructions_before"] // 5
    with zipfile.ZipFile(out) as z:
        shrunk = next(n for n in z.namelist() if n.endswith("shrunk.before_optimizations.txt"))
        text = z.read(shrunk).decode()
    assert " while(" in text and " call(" not in text
    assert record["seconds"] >= record["probe_seconds"] > 0
    assert main(["verify", str(out)]) == ExitCode.OK


def test_a_bundle_without_inputs_gets_a_shrunk_module_without_inputs(
    compile_crash: tuple[int, Path],
) -> None:
    # The program's module never ran (it crashed compiling): no snapshot, so every probe ran
    # on the inputs the replay generates, and the shrunk module ships none either.
    _, out = compile_crash
    manifest = _manifest(out)
    assert all(p == {"generated": True} for p in manifest["shrink"]["parameters"])
    shrunk = manifest["modules"][-1]
    assert "snapshot" not in shrunk["files"]
    assert shrunk["replay"]["inputs"].startswith("generated")
    with zipfile.ZipFile(out) as z:
        assert not [n for n in z.namelist() if n.startswith("shrunk/") and "inputs" in n]


def _shrunk_repro(out: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    with zipfile.ZipFile(out) as z:
        z.extractall(tmp_path / "unpacked")
    script = tmp_path / "unpacked" / "shrunk" / "repro.py"
    assert script.exists()
    return subprocess.run(
        [sys.executable, str(script)], env=clean_env(), cwd=tmp_path,
        capture_output=True, text=True, timeout=READY_TIMEOUT, check=False,
    )  # fmt: skip


def test_the_shrunk_crash_has_its_own_repro(
    compile_crash: tuple[int, Path], tmp_path: Path
) -> None:
    _, out = compile_crash
    done = _shrunk_repro(out, tmp_path)
    assert done.returncode != 0  # XLA aborts the process
    assert "Check failed: const_instr == nullptr" in done.stdout + done.stderr
    assert "inputs (generated, seed 42)" in done.stdout
    with zipfile.ZipFile(out) as z:
        assert "python shrunk/repro.py" in z.read("ISSUE.md").decode()


def test_the_shrunk_wrong_result_has_its_own_repro(
    log_exp: tuple[int, Path], tmp_path: Path
) -> None:
    _, out = log_exp
    done = _shrunk_repro(out, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # The shrunk module's own snapshot, read by the script itself.
    assert "inputs (the reporter's, from module_0000.jit_f.shrunk.snapshot" in done.stdout
    assert "WRONG RESULT" in done.stdout and "expected inf" in done.stdout
