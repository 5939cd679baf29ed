"""``xla-bugkit replay`` on real dumps: a dump folder, one dump file, a module that works."""

from __future__ import annotations

import json

import pytest
from conftest import ProgramRuns

from xla_bugkit.errors import ExitCode
from xla_bugkit.main import main

pytestmark = pytest.mark.slow


def test_a_dump_folder_module_that_crashes_fails_again(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["compile_crash"].dump_dir
    assert main(["replay", "-q", str(dump), "--module", "jit_add_noise$"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "jit_add_noise: compile crash (SIGABRT)" in out
    assert "Check failed: const_instr == nullptr" in out


def test_one_dump_file_as_json(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["compile_crash"].dump_dir
    (hlo,) = dump.glob("module_*.jit_add_noise.before_optimizations.hlo.pb")
    assert main(["replay", "-q", "--json", str(hlo)]) == ExitCode.OK
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["module"].endswith(".jit_add_noise")
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


def test_a_module_pattern_that_matches_nothing(
    program_runs: ProgramRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = program_runs["success"].dump_dir
    assert main(["replay", str(dump), "--module", "no_such_fn"]) == ExitCode.ERROR
    assert capsys.readouterr().err.strip() == (
        f"xla-bugkit: error: no module in {dump} matches 'no_such_fn'"
    )
