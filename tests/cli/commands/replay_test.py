"""``xla-bugkit replay`` on real dumps: a dump folder, one dump file, a module that works,
flags given by hand, text-only dumps."""

from __future__ import annotations

import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers.dumps import dump
from tests.helpers.programs import TWO_FUNCTIONS, ProgramRuns, clean_env
from xla_bugkit import proc
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode

pytestmark = pytest.mark.slow


def test_a_dump_folder_module_that_crashes_fails_again(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["compile_crash"].dump_dir
    assert main(["replay", "-q", str(dump), "--module", "jit_add_noise$"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "jit_add_noise: reproduced: crash: compile crash (SIGABRT)" in out
    assert "Check failed: const_instr == nullptr" in out


def test_the_json_and_the_exit_code_say_what_the_text_says(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    # The README's example, its dump replayed with --json: a dump records no outcome, and
    # the crash its replay meets is what the verdict says (it was "not reproduced" in the
    # JSON and the API, a compile crash in the text, exit 0).
    dump = program_runs["compile_crash"].dump_dir
    argv = ["replay", "-q", str(dump), "--module", "jit_add_noise$"]
    assert main(argv) == ExitCode.OK
    text = capsys.readouterr().out
    assert main([*argv, "--json"]) == ExitCode.OK
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "reproduced: crash"
    assert verdict["evidence"].startswith("compile crash (SIGABRT): buffer_assignment_util.cc:46]")
    first = text.splitlines()[0]
    assert first.startswith(f"{verdict['module']}: {verdict['outcome']}: compile crash (SIGABRT)")


def test_one_dump_file_as_json(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["compile_crash"].dump_dir
    (hlo,) = dump.glob("module_*.jit_add_noise.before_optimizations.hlo.pb")
    assert main(["replay", "-q", "--json", str(hlo)]) == ExitCode.OK
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["module"].endswith(".jit_add_noise")
    assert verdict["outcome"] == "reproduced: crash"
    assert verdict["failure"]["kind"] == "compile crash"
    assert verdict["failure"]["site"] == "buffer_assignment_util.cc:46"


def test_a_working_module_runs_and_matches_its_references(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["success"].dump_dir
    assert main(["replay", "-q", str(dump), "--module", "jit_train_step$"]) == (
        ExitCode.NOT_REPRODUCED
    )
    out = capsys.readouterr().out
    assert "jit_train_step: not reproduced: ran to completion; result agrees with" in out
    assert "inputs: snapshot" in out


def test_fake_data_replays_on_generated_inputs_though_a_snapshot_is_there(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["success"].dump_dir
    argv = ["replay", "-q", str(dump), "--module", "jit_train_step$", "--fake-data"]
    assert main(argv) == ExitCode.NOT_REPRODUCED
    out = capsys.readouterr().out
    assert "inputs: generated (seed 42)" in out and "inputs: snapshot" not in out


def test_a_module_pattern_that_matches_nothing(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["success"].dump_dir
    assert main(["replay", str(dump), "--module", "no_such_fn"]) == ExitCode.ERROR
    assert capsys.readouterr().err.strip() == (
        f"xla-bugkit: error: no module in {dump} matches 'no_such_fn'"
    )


def test_flags_as_the_readme_writes_them_replace_every_recorded_one(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    # Recorded: --xla_disable_all_hlo_passes=true, in the debug options and in the PJRT
    # folder's compile_options.pb. The flag given instead lets the passes run again.
    dump = program_runs["compile_crash"].dump_dir
    assert any(p.is_dir() for p in dump.glob("module_*.jit_add_noise"))
    argv = ["replay", "-q", str(dump), "--module", "jit_add_noise$"]
    code = main([*argv, "--flags", "--xla_cpu_enable_fast_math=false"])
    out = capsys.readouterr().out
    assert code == ExitCode.NOT_REPRODUCED, out
    assert "jit_add_noise: not reproduced: ran to completion; result agrees with" in out
    # Several flags in one quoted value, the first of which brings the crash back.
    flags = "--xla_disable_all_hlo_passes=true --xla_cpu_enable_fast_math=false"
    assert main([*argv, "--flags", flags]) == ExitCode.OK
    assert "jit_add_noise: reproduced: crash: compile crash (SIGABRT)" in capsys.readouterr().out


def test_an_unknown_xla_flag_is_an_error(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["success"].dump_dir
    argv = ["replay", str(dump), "--module", "jit_train_step$"]
    assert main([*argv, "--flags", "--xla_cpu_enable_fast_math=false --xla_foo=1"]) == 1
    out, err = capsys.readouterr()
    assert err.strip() == "xla-bugkit: error: unknown XLA flag --xla_foo"
    assert out == ""


def test_flags_without_a_value_is_still_a_bad_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path), "--flags", "--module", "x"]) == ExitCode.USAGE
    assert "argument --flags: expected one argument" in capsys.readouterr().err


@pytest.fixture(scope="module")
def text_dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Text-only dumps (XLA's default format) of a program with a 2000-element constant,
    with and without --xla_dump_large_constants."""
    root = tmp_path_factory.mktemp("text_dumps")
    script = root / "two_functions.py"
    script.write_text(TWO_FUNCTIONS)
    runs = {"full": "--xla_dump_large_constants", "elided": ""}

    def dump(name: str) -> Path:
        folder = root / name
        env = clean_env(f"--xla_dump_to={folder} {runs[name]}")
        done = proc.run_captured([sys.executable, str(script)], env=env, timeout=300)
        assert done.returncode == 0, done.output
        (text,) = folder.glob("module_*.jit_scale.before_optimizations.txt")
        assert not list(folder.glob("*.hlo.pb"))
        return text

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(runs, pool.map(dump, runs), strict=True))


def test_a_lone_text_module_is_parsed_and_replayed(
    text_dumps: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "-q", str(text_dumps["full"])]) == ExitCode.NOT_REPRODUCED
    out = capsys.readouterr().out
    assert "jit_scale: not reproduced: ran to completion; result agrees with op-by-op" in out
    assert "inputs: generated (seed 42)" in out


def test_a_text_module_with_elided_constants_is_refused(
    text_dumps: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "-q", str(text_dumps["elided"])]) == ExitCode.ERROR
    out, err = capsys.readouterr()
    assert "jit_scale: not replayable: " in out
    assert "elides large constants ({...}): dump with --xla_dump_large_constants" in out
    assert err.strip() == "xla-bugkit: error: no module could be replayed here"


@pytest.mark.parametrize("module", [[], ["--module", "jit_f"]])
def test_a_folder_without_dumps_says_so(
    tmp_path: Path, module: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a dump")
    assert main(["replay", str(tmp_path), *module]) == ExitCode.ERROR
    assert capsys.readouterr().err.strip() == (
        f"xla-bugkit: error: {tmp_path} holds no XLA dump (no files named module_NNNN.NAME.SUFFIX)"
    )


def test_a_dump_of_optimized_modules_alone_has_nothing_to_replay(
    program_runs: ProgramRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Optimized modules do not survive the trip back to StableHLO; nothing else is there.
    for after in program_runs["success"].dump_dir.glob("*.cpu_after_optimizations.txt"):
        shutil.copy(after, tmp_path)
    assert main(["replay", str(tmp_path)]) == ExitCode.ERROR
    err = capsys.readouterr().err
    assert "jit_train_step: no before_optimizations.hlo.pb or .txt" in err
    assert err.strip().splitlines()[-1] == (
        f"xla-bugkit: error: nothing in {tmp_path} can be replayed: no before-optimizations module"
    )


def test_a_wrong_result_only_extreme_values_show_is_found_without_a_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Fast math drops a NaN check (the program's own flags): generated inputs agree, so the
    # replay tries the extreme sets, as verify does, and says which one showed it.
    dumped = dump(tmp_path, "nan_fast_math")
    argv = ["replay", "-q", "--json", "--fake-data", str(dumped.dump), "--module", "jit_clean$"]
    assert main(argv) == ExitCode.OK
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "reproduced: wrong result"
    assert verdict["inputs"] == "extreme values: inf/nan (seed 42)"
    assert verdict["evidence"].endswith(
        "with generated (seed 42) inputs it agreed with the reference"
    )
