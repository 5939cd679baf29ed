"""rerun: the rerun's environment, and a real rerun of a failing program with dumps on."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS

from xla_bugkit import flags
from xla_bugkit.capture import rerun
from xla_bugkit.capture.dumps import Role, index
from xla_bugkit.errors import ProcessError
from xla_bugkit.failure import Kind, Phase


def test_child_env_adds_what_collect_needs_and_keeps_the_users_settings(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_dump_to=/home/me/dumps",
        "LIBTPU_INIT_ARGS": "--xla_tpu_some_option=1",
        "JAX_ENABLE_COMPILATION_CACHE": "true",
        "JAX_TRACEBACK_FILTERING": "auto",
    }
    frozen = dict(base)
    env, merged = rerun.child_env(base, tmp_path)
    assert base == frozen
    assert merged == flags.merge(base["XLA_FLAGS"], tmp_path)
    assert env["XLA_FLAGS"] == merged.value
    assert flags.split(env["XLA_FLAGS"])[0] == "--xla_cpu_enable_fast_math=false"
    assert f"--xla_dump_to={tmp_path}" in flags.split(env["XLA_FLAGS"])
    assert "--xla_dump_to=/home/me/dumps" not in env["XLA_FLAGS"]
    assert env["JAX_LOG_COMPILES"] == "1"
    # A persistent-cache hit would compile, and so dump, nothing.
    assert env["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    assert env["JAX_COMPILER_DETAILED_LOGGING_MIN_OPS"] == "0"
    assert env["JAX_TRACEBACK_FILTERING"] == "auto"  # the user's choice stands
    assert env["LIBTPU_INIT_ARGS"] == (
        f"--xla_tpu_some_option=1 --xla_mosaic_dump_to={tmp_path / 'mosaic'}"
    )
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["PATH"] == "/usr/bin"


def test_child_env_without_user_settings(tmp_path: Path) -> None:
    env, merged = rerun.child_env({}, tmp_path)
    assert merged.user_flags == () and merged.notes == ()
    assert env["XLA_FLAGS"] == merged.value
    assert env["LIBTPU_INIT_ARGS"] == f"--xla_mosaic_dump_to={tmp_path / 'mosaic'}"
    assert env["JAX_TRACEBACK_FILTERING"] == "off"
    assert env["JAX_LOG_COMPILES"] == "1"


def environ() -> dict[str, str]:
    """os.environ, less the variable pytest itself changes between setup and call."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """os.environ as a user's shell would have it: CPU jax and flags of their own."""
    for name in list(os.environ):
        if name.startswith(("JAX_", "XLA_", "LIBTPU_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_some_option=1")
    return environ()


def test_rerun_of_a_compile_error(
    user_env: dict[str, str], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dump_dir = tmp_path / "work" / "dumps"
    log_path = tmp_path / "run.log"
    command = [sys.executable, str(PROGRAMS / "compile_error.py")]
    handler = signal.getsignal(signal.SIGTERM)
    record = rerun.rerun(command, dump_dir=dump_dir, log_path=log_path, timeout=120, echo=True)

    # The user's environment and our signal handling are as they were.
    assert environ() == user_env
    assert signal.getsignal(signal.SIGTERM) == handler

    assert record.command == tuple(command)
    assert record.exit_status == 1
    assert not record.timed_out and not record.interrupted
    assert record.duration > 0
    failure = record.failure
    assert failure.kind is Kind.COMPILE_ERROR and failure.phase is Phase.COMPILE
    assert failure.status_code == "INTERNAL"
    assert failure.compiling == "train_step"
    assert failure.headline.startswith("INTERNAL: Too many extra compilation parts")

    # The log holds the output as the child wrote it; echo sent it to the terminal too.
    assert record.log == log_path
    assert log_path.read_text("utf-8") == record.output
    assert "Compiling jit(train_step)" in record.output
    out, err = capfd.readouterr()
    assert "Too many extra compilation parts" in out + err

    # The user's flag reached XLA, next to the program's own and collect's dump flags.
    assert record.xla_flags.user_flags == ("--xla_cpu_enable_fast_math=false",)
    assert record.xla_flags.flags[0] == "--xla_cpu_enable_fast_math=false"
    idx = index(dump_dir)
    (module,) = [m for m in idx.modules if m.name == "jit_train_step"]
    assert module.first(Role.BEFORE_PROTO) is not None
    options = module.first(Role.DEBUG_OPTIONS)
    assert options is not None
    text = (dump_dir / options.path).read_text("utf-8")
    assert "xla_cpu_parallel_codegen_split_count: 0" in text
    assert f'xla_dump_to: "{dump_dir}"' in text


def test_rerun_of_a_hang_is_killed_after_the_timeout(
    user_env: dict[str, str], tmp_path: Path
) -> None:
    record = rerun.rerun(
        ["bash", "-c", "echo waiting; sleep 100"],
        dump_dir=tmp_path / "dumps",
        log_path=tmp_path / "run.log",
        timeout=0.5,
        echo=False,
    )
    assert record.timed_out
    assert record.failure.kind is Kind.HANG
    assert (tmp_path / "run.log").read_text() == "waiting\n"
    assert (tmp_path / "dumps").is_dir()
    assert environ() == user_env


def test_rerun_takes_an_explicit_base_env(user_env: dict[str, str], tmp_path: Path) -> None:
    base = {"PATH": os.environ["PATH"], "XLA_FLAGS": "--xla_foo=1"}
    record = rerun.rerun(
        ["bash", "-c", 'echo "$XLA_FLAGS"; echo "${JAX_PLATFORMS:-none}"'],
        dump_dir=tmp_path / "dumps",
        log_path=tmp_path / "run.log",
        timeout=30,
        echo=False,
        base_env=base,
    )
    assert record.exit_status == 0
    assert record.failure.kind is Kind.SUCCESS
    xla_flags, platforms = record.output.splitlines()
    assert flags.split(xla_flags) == list(record.xla_flags.flags)
    assert record.xla_flags.user_flags == ("--xla_foo=1",)
    assert platforms == "none"  # os.environ was not used


def test_rerun_of_a_missing_command(user_env: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match="command not found"):
        rerun.rerun(
            ["no-such-command-for-bugkit"],
            dump_dir=tmp_path / "dumps",
            log_path=tmp_path / "run.log",
            timeout=10,
            echo=False,
        )
