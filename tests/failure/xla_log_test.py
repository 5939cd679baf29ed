"""xla_log: XLA's own ``Dumping module_NNNN...`` lines, on real runs of tests/programs."""

from __future__ import annotations

import sys
import types

import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit.choose.dumps import index
from xla_bugkit.failure import xla_log


@pytest.mark.parametrize(
    ("user", "merged"),
    [
        (None, "dump=1"),
        ("", "dump=1"),
        ("hlo_pass_pipeline=2", "hlo_pass_pipeline=2,dump=1"),
        ("dump=3,xla_ops=1", "dump=3,xla_ops=1"),  # the user's higher level wins
        ("dump=0, xla_graph_executor=3", "dump=1,xla_graph_executor=3"),
        ("odd,,dump=x", "odd,dump=x,dump=1"),  # what we cannot read is passed on as it was
    ],
)
def test_merge_vmodule(user: str | None, merged: str) -> None:
    assert xla_log.merge_vmodule(user, {"dump": 1}) == merged


def test_log_env_lets_info_through_unless_the_user_chose_a_level() -> None:
    assert xla_log.log_env({}) == {"TF_CPP_VMODULE": "dump=1", "TF_CPP_MIN_LOG_LEVEL": "0"}
    mine = xla_log.log_env({"TF_CPP_VMODULE": "dump=2", "TF_CPP_MIN_LOG_LEVEL": "1"})
    assert mine == {"TF_CPP_VMODULE": "dump=2", "TF_CPP_MIN_LOG_LEVEL": "1"}


def test_the_level_import_jax_sets_is_not_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import jax`` sets TF_CPP_MIN_LOG_LEVEL=1 in its process: a notebook kernel's 1 is
    jax's (the magic leaves it out of collect's environment)."""
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    assert xla_log.users_level({"TF_CPP_MIN_LOG_LEVEL": "1"}) is None
    assert xla_log.users_level({"TF_CPP_MIN_LOG_LEVEL": "2"}) == "2"
    monkeypatch.delitem(sys.modules, "jax")
    assert xla_log.users_level({"TF_CPP_MIN_LOG_LEVEL": "1"}) == "1"


def test_jaxlib_names_every_module_it_dumps(program_runs: ProgramRuns) -> None:
    run = program_runs["two_functions"]
    lines = xla_log.dump_lines(run.output)
    modules = index(run.dump_dir).modules
    assert {(line.id, line.rest.split(".")[0]) for line in lines} == {
        (m.id, m.name) for m in modules
    }
    for m in modules:
        stages = [line.stage for line in lines if line.id == m.id]
        assert stages[0] == "compile" and "compiled" in stages, (m.label, stages)
        assert xla_log.compile_finished(lines, m.id)
    assert any(line.stage == "snapshot" for line in lines)
    assert xla_log.first_error(run.output) is None


def test_the_last_file_before_a_compile_crash(program_runs: ProgramRuns) -> None:
    run = program_runs["compile_crash"]
    lines = xla_log.dump_lines(run.output)
    error = xla_log.first_error(run.output, after=lines[0].offset)
    assert error is not None and error.fatal
    assert error.site == "buffer_assignment_util.cc:46"
    assert error.message.startswith("Check failed: const_instr == nullptr")
    last = xla_log.last_before(lines, error.offset)
    assert last is not None
    (crashed,) = [m for m in index(run.dump_dir).modules if m.name == "jit_add_noise"]
    assert (last.id, last.file) == (crashed.id, f"{crashed.label}.debug_options")
    assert xla_log.last_before(lines, lines[0].offset) is None


def test_the_dated_form_of_tensorflow_and_pytorch_xla() -> None:
    output = (
        "2026-12-02 17:51:18.100000: I external/xla/xla/service/dump.cc:233] Dumping "
        "module_0003.SyncTensorsGraph.8.before_optimizations.txt to /tmp/d\n"
        "2026-12-02 17:51:18.336598: F external/xla/xla/map_util.h:50] Check failed: x\n"
    )
    (line,) = xla_log.dump_lines(output)
    assert (line.id, line.rest, line.stage) == (3, "SyncTensorsGraph.8.before_optimizations.txt",
                                                "compile")  # fmt: skip
    error = xla_log.first_error(output)
    assert error is not None and error.fatal and error.site == "external/xla/xla/map_util.h:50"


def test_harmless_error_lines_are_passed_over() -> None:
    output = (
        "E1202 10:00:00.000000 1 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
        "I1202 10:00:01.000000 2 dump.cc:233] Dumping module_0001.jit_f.snapshot.5.pb to /d\n"
        "E1202 10:00:02.000000 2 slow_operation_alarm.cc:140] Constant folding is slow\n"
        "E1202 10:00:03.000000 2 cpu_client.cc:1923] Failed to get literal for result\n"
    )
    lines = xla_log.dump_lines(output)
    error = xla_log.first_error(output, after=lines[0].offset)
    assert error is not None and not error.fatal and error.site == "cpu_client.cc:1923"
    assert xla_log.without_dump_lines(output).count("\n") == 3
