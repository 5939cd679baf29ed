"""rerun: the rerun's environment, and a real rerun of a failing program with dumps on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, wait_for_child
from xla_bugkit.choose.dumps import Role, index
from xla_bugkit.errors import ProcessError
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.hlo import flags
from xla_bugkit.run import evidence_files, main_end, rerun
from xla_bugkit.run.at_main_end import AtMainEnd
from xla_bugkit.run.record import RunRecord

pytestmark = pytest.mark.jax  # real jax programs, replay children or jax itself


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
    # The hook records what JAX compiles: the program's own log stays as it prints it.
    assert "JAX_LOG_COMPILES" not in env
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
    # No hook to record whether XLA was compiling: JAX's frames in the traceback tell.
    assert env["JAX_TRACEBACK_FILTERING"] == "off"
    hooked, _ = rerun.child_env({}, tmp_path, tmp_path / "processes")
    assert "JAX_TRACEBACK_FILTERING" not in hooked  # tracebacks as the program prints them
    assert "JAX_LOG_COMPILES" not in env


def environ() -> dict[str, str]:
    """os.environ, less the variable pytest itself changes between setup and call."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """os.environ as a user's shell would have it: CPU jax and flags of their own."""
    # TF_CPP_ too: an earlier test's `import jax` in this process sets its log level.
    for name in list(os.environ):
        if name.startswith(("JAX_", "XLA_", "LIBTPU_", "TF_CPP_")):
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
    # A generous bound: importing jax alone can take 15 s on a loaded machine.
    record = rerun.rerun(
        command, dump_dir=dump_dir, log_path=log_path, ending=rerun.Ending(600), echo=True
    )

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
    # The program's output is its own: no compile log turned on (the hook records it).
    assert "Compiling jit(train_step)" not in record.output
    assert record.culprit is not None and "XLA raised while compiling" in record.culprit.why
    out, err = capfd.readouterr()
    assert "Too many extra compilation parts" in out + err
    # The lines that are there only because collect turned them on (XLA's INFO lines when
    # the user set no log level, its dump lines) did not reach the terminal, and the
    # program's output leaves them out too.
    hidden = [line for line in record.output.splitlines() if line and line not in out + err]
    assert hidden and not [line for line in hidden if line in record.program_output]
    assert "Too many extra compilation parts" in record.program_output
    # Its traceback is the one it prints bare: jax's filtering on, the hook's frames out.
    bare = subprocess.run(command, env=user_env, capture_output=True, text=True, timeout=600)

    def frames(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if line.strip().startswith('File "')]

    assert frames(record.program_output) == frames(bare.stderr) != []

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


def test_rerun_killed_by_its_timeout_is_a_hang(user_env: dict[str, str], tmp_path: Path) -> None:
    # "sleep 100" cannot end within 0.5 s, however slow the machine: the timeout always fires.
    record = rerun.rerun(
        ["sleep", "100"],
        dump_dir=tmp_path / "dumps",
        log_path=tmp_path / "run.log",
        ending=rerun.Ending(0.5),
        echo=False,
    )
    assert record.timed_out and not record.interrupted
    failure = record.failure
    assert failure.kind is Kind.HANG
    assert failure.headline == "killed after the timeout"  # no jax: nothing says where it was
    assert failure.stopped_by == "timeout"
    # The stop is the timeout's moment; the program printed nothing at all before it.
    assert failure.ran_seconds == failure.stalled_seconds == 0.5
    assert record.duration >= 0.5
    assert (tmp_path / "run.log").read_text() == record.output == ""
    assert (tmp_path / "dumps").is_dir()
    assert environ() == user_env


# Runs rerun in a process of its own, so that the test can interrupt it as a user would.
RERUN_DRIVER = """
import json, sys
from pathlib import Path
from xla_bugkit.run import rerun

record = rerun.rerun(sys.argv[1:], dump_dir=Path("dumps"), log_path=Path("run.log"),
                     ending=rerun.Ending(None), echo=False)
print(json.dumps({"interrupted": record.interrupted, "failure": record.failure.to_json()}))
"""


def test_ctrl_c_on_a_program_inside_xla_is_a_hang(user_env: dict[str, str], tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    argv = [sys.executable, "-c", RERUN_DRIVER, sys.executable, str(PROGRAMS / "hang.py"),
            str(ready)]  # fmt: skip
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        wait_for_child(ready, driver)  # jax compiled jit(spin) and is about to run it
    finally:
        driver.send_signal(signal.SIGINT)
    out, _ = driver.communicate(timeout=READY_TIMEOUT)
    assert driver.returncode == 0, out
    result = json.loads(out.splitlines()[-1])
    assert result["interrupted"] is True
    failure = Failure.from_json(result["failure"])
    assert failure.kind is Kind.HANG
    assert failure.phase is Phase.RUN
    assert failure.executing == "spin"
    assert failure.stopped_by == "user"
    assert failure.ran_seconds is not None and failure.stalled_seconds is not None
    assert 0 <= failure.stalled_seconds <= failure.ran_seconds
    assert failure.headline.startswith("XLA was executing jit(spin) with no output for ")
    assert "; stopped by the user after " in failure.headline
    # What the process recorded of itself says so, not a compile log in its output.
    assert "recorded that it was executing jit(spin) when it was stopped" in str(failure.evidence)
    log = xla_log.without_dump_lines((tmp_path / "run.log").read_text())
    assert "Finished XLA compilation" not in log


def test_rerun_takes_an_explicit_base_env(user_env: dict[str, str], tmp_path: Path) -> None:
    base = {"PATH": os.environ["PATH"], "XLA_FLAGS": "--xla_foo=1"}
    record = rerun.rerun(
        ["bash", "-c", 'echo "$XLA_FLAGS"; echo "${JAX_PLATFORMS:-none}"'],
        dump_dir=tmp_path / "dumps",
        log_path=tmp_path / "run.log",
        ending=rerun.Ending(600),
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
            ending=rerun.Ending(10),
            echo=False,
        )


def _rerun_script(tmp_path: Path, text: str, at_main_end: main_end.Then | None = None) -> RunRecord:
    """``text`` written as a script in ``tmp_path``, run there under collect's rerun."""
    script = tmp_path / "train.py"
    script.write_text(text)
    return rerun.rerun(
        [sys.executable, str(script)],
        dump_dir=tmp_path / "dump",
        log_path=tmp_path / "run.log",
        ending=rerun.Ending(600),
        echo=False,
        at_main_end=at_main_end,
    )


_ENDS = {
    # A worker that imports jax and ends first is not the program.
    "returns": "subprocess.run([sys.executable, '-c', 'import jax'], check=True)\n",
    "raises": "raise RuntimeError('the step failed')\n",
    "leaves by os._exit": "os._exit(3)\n",
}


@pytest.mark.parametrize("ending", list(_ENDS))
def test_the_program_says_when_its_main_module_has_finished(
    user_env: dict[str, str], tmp_path: Path, ending: str
) -> None:
    program_text = (
        "import os, subprocess, sys\n"
        "import jax, jax.numpy as jnp\n"
        "print(jax.jit(lambda x: x + 1)(jnp.ones(3)).sum(), flush=True)\n" + _ENDS[ending]
    )
    heard: list[int] = []
    record = _rerun_script(
        tmp_path, program_text, at_main_end=lambda pid, exited: heard.append(pid)
    )
    assert record.exit_status == {"returns": 0, "raises": 1}.get(ending, 3), record.output
    processes = evidence_files.read(tmp_path / "processes")
    program = next(p for p in processes if p.ppid == os.getpid())
    # Once, by the program itself: os._exit runs no teardown, so it tells nothing.
    assert heard == ([] if ending == "leaves by os._exit" else [program.pid])
    assert not (tmp_path / "processes" / main_end.FIFO).exists()


# How the main module ends, and the status the record at its end foresees (the program's
# real exit status, every time): ``raise SystemExit(message)`` calls no sys.exit and leaves
# no traceback; the interpreter's own write of the message says it.
_FORESEEN = {
    "raise SystemExit(message)": ("raise SystemExit('values disagree: max error 0.01')\n", 1),
    "exit(message)": ("exit('values disagree')\n", 1),
    "sys.exit(2)": ("sys.exit(2)\n", 2),
    "its own stderr, then returns": ("print('max error 0.01', file=sys.stderr)\n", 0),
    "raise SystemExit(None)": ("raise SystemExit\n", 0),
}


@pytest.mark.parametrize("ending", list(_FORESEEN))
def test_the_record_at_the_main_modules_end_foresees_its_exit_status(
    user_env: dict[str, str], tmp_path: Path, ending: str
) -> None:
    text, status = _FORESEEN[ending]
    program_text = (
        "import sys\nimport jax, jax.numpy as jnp\n"
        "print(jax.jit(lambda x: x + 1)(jnp.ones(3)).sum(), flush=True)\n" + text
    )
    so_far: list[RunRecord] = []

    def held(pid: int, record: Callable[[], RunRecord], deadline: float | None) -> bool:
        so_far.append(record())
        return False

    record = _rerun_script(tmp_path, program_text, AtMainEnd(while_held=held))
    assert record.exit_status == status, record.output
    assert [r.exit_status for r in so_far] == [status], record.output
    # The process's own exit record says the same, and how (none said by a raise without
    # a message, or a main module that returns: status 0).
    program = next(p for p in evidence_files.read(tmp_path / "processes") if p.started_backend)
    assert program.exited and program.exit_status == (status or None), program
    how = {"sys.exit(2)": "sys.exit", "raise SystemExit(message)": "SystemExit"}
    how["exit(message)"] = "SystemExit"
    assert program.exit_how == how.get(ending, ""), program


WENT_ON = """\
import atexit, threading
import jax, jax.numpy as jnp

split = jax.jit(lambda x: x * 2, compiler_options={"xla_cpu_parallel_codegen_split_count": 0})

def loader():
    raise ValueError("a bad batch")  # the program's own: not XLA's

def evaluator():
    print(split(jnp.ones(4)))  # XLA fails to compile it: the thread ends

for target in (loader, evaluator):
    t = threading.Thread(target=target, name=target.__name__)
    t.start()
    t.join()
atexit.register(lambda: print(split(jnp.ones(8))))
print("main done", flush=True)
"""


def test_an_xla_error_python_printed_and_went_on_from_is_the_failure(
    user_env: dict[str, str], tmp_path: Path
) -> None:
    record = _rerun_script(tmp_path, WENT_ON)
    assert record.exit_status == 0, record.output
    assert record.culprit is not None
    where = [(u.where, u.type.rsplit(".", 1)[-1]) for u in record.culprit.process.uncaught]
    assert where == [
        ("thread 'loader'", "ValueError"),
        ("thread 'evaluator'", "JaxRuntimeError"),
        ("an atexit function", "JaxRuntimeError"),
    ]
    assert record.failure.kind is Kind.COMPILE_ERROR, record.failure
    assert "Too many extra compilation parts" in record.failure.headline
    assert record.went_on_from == "an atexit function"  # the newest of them


CAPTURES_A_WORKER = """\
import subprocess, sys
work = "import jax; print(float(jax.jit(lambda x: x + 1)(1.0)))"
taken = subprocess.run([sys.executable, "-c", work], capture_output=True, text=True)
print("worker's stderr, as the program read it:", repr(taken.stderr), flush=True)
subprocess.run([sys.executable, "-c", work.replace("x + 1", "x + 2")], check=True)
"""


def test_a_worker_whose_stderr_the_program_reads_logs_as_it_does_bare(
    user_env: dict[str, str], tmp_path: Path
) -> None:
    record = _rerun_script(tmp_path, CAPTURES_A_WORKER)
    assert record.exit_status == 0, record.output
    read = next(line for line in record.output.splitlines() if "as the program read it" in line)
    assert read.endswith("read it: ''"), read  # as bare: XLA logged nothing there
    # The worker that writes where the program does still names each file XLA dumps.
    assert any("Dumping module_" in line for line in record.output.splitlines())


# A program whose check fails: it prints so through a buffered stdout of its own and calls
# sys.exit(1); its exit is then cut short, as a job's coordination service aborts a process
# waiting at jax.distributed's shutdown barrier: in an atexit function registered after the
# hook's own (so run before its ``exit`` record), or while SystemExit still unwinds, before
# Python flushes the program's stdout.
ABORTED = """
import atexit, os, sys
import jax.numpy as jnp

sys.stdout = open(sys.stdout.fileno(), "w", buffering=1 << 16, closefd=False)
if sys.argv[1] == "at exit":
    atexit.register(os.abort)
total = float(jnp.sum(jnp.arange(4.0)))
try:
    print(f"energy check failed: total {total}, expected 7.0")
    sys.exit(1)
finally:
    if sys.argv[1] == "while unwinding":
        os.abort()
"""


@pytest.mark.jax
@pytest.mark.parametrize("when", ["at exit", "while unwinding"])
def test_a_program_that_exits_itself_and_is_aborted_then_failed_by_its_own_exit(
    tmp_path: Path, when: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(ABORTED)
    record = rerun.rerun([sys.executable, str(script), when], dump_dir=tmp_path / "dump",
                         log_path=tmp_path / "run.log", ending=rerun.Ending(600),
                         echo=False)  # fmt: skip
    assert record.exit_status == -signal.SIGABRT, record.output
    # The hook flushed the program's own buffered line as it called sys.exit.
    assert "energy check failed: total 6.0, expected 7.0" in record.output
    failure = record.failure
    assert failure.kind is Kind.EXIT and failure.peer is None and failure.signal is None
    assert failure.headline == "energy check failed: total 6.0, expected 7.0"
    assert failure.evidence == (
        "the program ended itself: it called sys.exit(1) (its process's own record), and was "
        "then ended during its exit (SIGABRT), before it could finish"
    )
    assert record.culprit is not None and record.culprit.process.asked_exit == 1
