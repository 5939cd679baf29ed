"""The start-up hook in real Python processes: what it records, and what it leaves alone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import (
    PROGRAMS,
    READY_TIMEOUT,
    XLA_BUGKIT,
    clean_env,
    hooked_env,
    run,
    run_collect,
    wait_for_file,
)
from xla_bugkit.choose.dumps import Role
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import flags
from xla_bugkit.replay.inputs import replay_input
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.run import evidence_files, hook
from xla_bugkit.run.hook import JAXPRS

# Sets one flag to an empty value before importing jax (only XLA_FLAGS can tell it), lowers
# a limit, compiles and runs, then starts a second jax process, which must dump elsewhere.
PROGRAM = textwrap.dedent(
    """
    import os, resource, subprocess, sys
    os.environ["XLA_FLAGS"] += " --xla_cpu_experimental_ynn_fusion_type="
    import jax, jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.sin(x) * 2.0

    step(jnp.ones(4)).block_until_ready()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))
    child = "import jax; print(jax.jit(lambda x: x + 1)(1.0))"
    subprocess.run([sys.executable, "-c", child], check=True)
    print("parent done")
    """
)


@pytest.fixture(scope="module")
def hooked_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("hooked")
    (work / "program.py").write_text(PROGRAM)
    done = run([sys.executable, "program.py"], hooked_env(work), work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work, done.stdout


def test_a_process_without_jax_writes_nothing_and_runs_the_site_hook_it_shadows(
    tmp_path: Path,
) -> None:
    site = tmp_path / "user_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.user_site_ran = True\n")
    script = "import sys; print(getattr(sys, 'user_site_ran', False), sys.argv[1:])"
    plain = clean_env()
    plain["PYTHONPATH"] = str(site)
    env = hooked_env(tmp_path, plain)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(hook.SITE), str(site)]
    with_hook = run([sys.executable, "-c", script, "a b"], env, tmp_path)
    without = run([sys.executable, "-c", script, "a b"], plain, tmp_path)
    assert with_hook.stdout == without.stdout == "True ['a b']\n"
    assert with_hook.stderr == without.stderr == ""
    assert not (tmp_path / evidence_files.PROCESSES).exists()


def test_a_broken_shadowed_site_hook_is_reported_as_python_reports_it(tmp_path: Path) -> None:
    site = tmp_path / "user_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("raise ValueError('broken site')\n")
    env = hooked_env(tmp_path, {**clean_env(), "PYTHONPATH": str(site)})
    done = run([sys.executable, "-c", "print('ran')"], env, tmp_path)
    assert done.returncode == 0 and done.stdout == "ran\n"
    assert "Error in sitecustomize" in done.stderr and "broken site" in done.stderr


@pytest.mark.slow
def test_each_jax_process_records_itself_and_dumps_apart(hooked_program: tuple[Path, str]) -> None:
    work, stdout = hooked_program
    assert stdout.splitlines()[-2:] == ["2.0", "parent done"]
    parent, child = evidence_files.load(work)
    assert child.ppid == parent.pid
    # The flag the program set itself, with its empty value, as XLA read it.
    assert "--xla_cpu_experimental_ynn_fusion_type=" in parent.env["XLA_FLAGS"].split()
    assert (parent.rank, parent.processes, parent.devices, parent.platform) == (0, 1, 1, "cpu")
    # The first process keeps collect's folder; the second dumps into one of its own.
    assert parent.dump_dir == work / "dump"
    assert child.dump_dir == work / "dump" / str(child.pid)
    assert any(child.dump_dir.glob("module_*.jit__lambda.before_optimizations.txt"))
    step = [e for e in parent.events if e.module == "jit_step"]
    assert [e.kind for e in step] == ["compile", "execute"] and all(e.finished for e in step)
    assert step[0].id is not None and step[1].id == step[0].id
    assert step[0].shapes == "tensor<4xf32>" and step[0].fun == "jit(step)"
    assert any((work / "dump").glob(f"module_{step[0].id:04d}.jit_step.*"))
    soft = parent.rlimits["RLIMIT_NOFILE"][0]
    assert soft == child.rlimits["RLIMIT_NOFILE"][0]  # inherited, and recorded as changed
    assert parent.exited and parent.exit_status is None and parent.stack is None
    assert parent.unfinished is None


WAITS = textwrap.dedent(
    """
    import sys
    import jax
    open(sys.argv[1], "w").close()

    def waiting_for_the_signal():
        sys.stdin.read()

    waiting_for_the_signal()
    """
)


@pytest.mark.slow
def test_sigterm_leaves_the_python_stack_and_still_terminates(tmp_path: Path) -> None:
    (tmp_path / "waits.py").write_text(WAITS)
    ready = tmp_path / "ready"
    with subprocess.Popen(
        [sys.executable, "waits.py", str(ready)], env=hooked_env(tmp_path), cwd=tmp_path,
        stdin=subprocess.PIPE,
    ) as p:  # fmt: skip
        wait_for_file(ready, ended=lambda: p.poll() is not None)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=READY_TIMEOUT) == -signal.SIGTERM
    (process,) = evidence_files.load(tmp_path)
    assert process.stack is not None and "waiting_for_the_signal" in process.stack
    assert not process.exited


# --- what the hook recorded, through collect and verify ---------------------------------


@pytest.mark.slow
def test_a_flag_the_program_set_itself_reaches_collects_and_verifys_replay(
    tmp_path: Path,
) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "sets_own_flags.py")])
    assert c.returncode == ExitCode.OK, c.stderr[-3000:]
    m = c.manifest()
    flag = "--xla_backend_extra_options=-xla-bugkit-no-such-option"
    assert m["xla_flags"] == [flag]
    (module,) = [x for x in m["modules"] if x["replay"]["outcome"] == "reproduced: crash"]
    verify = subprocess.run([XLA_BUGKIT, "verify", str(c.bundle)], capture_output=True,
                            text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert verify.returncode == ExitCode.OK, verify.stderr
    # The verdicts rest on the flag: the table says each replay applied it.
    assert f"the reporter's XLA flags, applied to each replay: {flag}\n" in verify.stdout
    # The PJRT folder's compile_options.pb carries the map too; a module replayed from its
    # HLO and debug options alone (no PJRT folder) has only the process's flags to go by.
    root = c.unpack(tmp_path / "unpacked")
    pjrt = {Role.PJRT_MLIR.value, Role.COMPILE_OPTIONS.value}
    files = {r: root / path for r, path in module["files"].items() if r not in pjrt}
    alone = replay_input(module["label"], files, "cpu")
    assert alone is not None and flag not in alone.xla_flags
    expected = Failure.from_json(m["failure"])
    assert not replay(alone, expected=expected, options=ReplayOptions(reference=False)).reproduced
    given = replace(alone, xla_flags=flags.in_force(alone.xla_flags, m["xla_flags"]))
    assert replay(given, expected=expected, options=ReplayOptions(reference=False)).reproduced


@pytest.mark.slow
def test_dumps_the_program_sent_elsewhere_are_bundled(tmp_path: Path) -> None:
    mine = tmp_path / "my dumps"
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "own_dump_dir.py"),
                                         str(mine)])  # fmt: skip
    assert c.returncode == ExitCode.OK, c.stderr[-3000:]
    chosen = c.manifest()["modules"][0]
    assert chosen["name"] == "jit_add_noise" and chosen["replay"]["outcome"] == "reproduced: crash"
    assert any(mine.glob("module_*.jit_add_noise.before_optimizations.txt"))  # left in place


@pytest.mark.slow
def test_a_memory_cap_the_program_set_itself_is_the_replays_cap(tmp_path: Path) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "own_rlimit.py")])
    # Reproduced, and the program's own cap's doing: not XLA's bug, so not exit 0.
    assert c.returncode == ExitCode.NOT_REPRODUCED, c.stderr[-3000:]
    assert c.manifest()["blame"]["whose"] == "not xla"
    m = c.manifest()
    assert 0 < m["process"]["memory_cap"] < 4 << 30  # the module needs 4 GiB
    assert m["modules"][0]["replay"]["outcome"] == "reproduced: error"
    assert main(["verify", "-q", str(c.bundle)]) == ExitCode.OK
    # The report says so, and repro.py sets the same cap: without it, it would not fail.
    assert "The failing process ran with its address space capped at " in c.text("ISSUE.md")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(c.bundle) as z:
        z.extractall(unpacked)
    script = (unpacked / "repro.py").read_text()
    assert f"MEMORY_CAP = {m['process']['memory_cap']}\n" in script
    done = subprocess.run([sys.executable, str(unpacked / "repro.py")], capture_output=True,
                          text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "capped its address space at" in done.stdout


SHARDED_RUN = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, Mesh, PartitionSpec

    mesh = Mesh(jax.devices(), ("i",))
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, PartitionSpec("i")))
    print(jax.jit(lambda x, y: x * y + 1.0)(x, 3.0).sum())
    """
)


@pytest.mark.slow
def test_a_multi_device_execution_keeps_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "sharded_run.py").write_text(SHARDED_RUN)
    done = run([sys.executable, "sharded_run.py"], hooked_env(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (p,) = evidence_files.load(tmp_path)
    assert p.devices == 4
    (saved,) = [e.args for e in p.events if e.args is not None and e.module == "jit__lambda"]
    assert saved is not None
    with np.load(saved) as args:
        assert np.array_equal(args["arr_0"], np.arange(16.0, dtype=np.float32))
        assert float(args["arr_1"]) == 3.0


@pytest.mark.jax
def test_jaxprs_are_dumped_beside_the_dumps_and_never_logged_to_the_program(
    tmp_path: Path,
) -> None:
    # A program that logs at INFO shows every record of jax's loggers; jax logs each jaxpr
    # it dumps on the root logger. The program's output must stay its own.
    (tmp_path / "program.py").write_text(
        "import logging\nlogging.basicConfig(level=logging.INFO)\n"
        "import jax, jax.numpy as jnp\n"
        "def scale(x):\n    return x * 3\n"
        "print(jax.jit(scale)(jnp.ones(3)))\n"
    )
    done = run([sys.executable, "program.py"], hooked_env(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Dumping jaxpr" not in done.stdout + done.stderr
    jaxprs = list((tmp_path / "dump" / JAXPRS).glob("jax_*_scale.jaxpr.txt"))
    assert len(jaxprs) == 1 and "mul" in jaxprs[0].read_text()


@pytest.mark.jax
def test_a_program_that_sets_up_logging_after_its_first_jit_prints_as_it_does_bare(
    tmp_path: Path,
) -> None:
    """Under collect jax dumps each jaxpr and logs it with logging.log(), which would set up
    the root logger before the program's own basicConfig (ignored then: its INFO lines and
    format lost)."""
    program = [sys.executable, str(PROGRAMS / "logs_after_first_jit.py")]
    bare = run(program, clean_env(), tmp_path)
    hooked = run(program, hooked_env(tmp_path / "work"), tmp_path)
    assert bare.returncode == hooked.returncode == 0, hooked.stderr[-3000:]
    assert "[INFO] job | first total 56.0" in bare.stderr  # what the program prints bare
    assert hooked.stdout == bare.stdout
    # XLA's own log lines at collect's log level, which collect keeps off the terminal.
    xla_log = re.compile(r"^[IW]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")
    shown = [line for line in hooked.stderr.splitlines() if not xla_log.match(line)]
    assert shown == bare.stderr.splitlines()


@pytest.mark.jax
def test_a_program_that_exits_while_the_device_computes_exits_as_it_does_bare(
    tmp_path: Path,
) -> None:
    """The hook watches an execution's outputs until they are ready; the program's exit
    must not wait for it, nor abort on it (three runs: the exit races the computation)."""
    program = [sys.executable, str(PROGRAMS / "exits_while_computing.py")]
    for i in range(3):
        done = run(program, hooked_env(tmp_path / str(i)), tmp_path)
        assert done.returncode == 3, done.stderr[-2000:]
        (records,) = (tmp_path / str(i) / evidence_files.PROCESSES).glob("*.jsonl")
        assert '"pending": true' in records.read_text()  # it was computing as dispatch returned


def test_the_hooks_own_frames_are_said_in_one_line() -> None:
    from xla_bugkit.run import hook as hook_package

    frames = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/jax/_src/pxla.py", line 2873, in f\n'
        "    xla_executable = compiler.compile_or_get_cached(\n"
        "                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        '  File "/opt/venv/lib/python3.11/site-packages/xla_bugkit/run/hook/jax_patches.py",'
        " line 257, in compile_or_get_cached\n"
        "    executable = original(*args, **kwargs)\n"
        "                 ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        '  File "/opt/venv/lib/python3.11/site-packages/jax/_src/compiler.py", line 422, in g\n'
        "    return backend_compile_and_load(\n"
    )
    shown = hook_package.without_own_frames(frames)
    assert "xla_bugkit" not in shown and "original(*args" not in shown
    assert f"  {hook_package.OWN_FRAME}\n  File " in shown
    assert shown.count("File ") == 2 and "compiler.compile_or_get_cached(" in shown
    # The user's own file of that name is theirs.
    mine = '  File "/home/u/xla_bugkit_notes/run.py", line 3, in main\n    go()\n'
    assert hook_package.without_own_frames(mine) == mine


# A Pallas TPU kernel, called in a jitted function: on a CPU it runs only in interpret mode
# (compiled, jax says "Only interpret mode is supported on CPU backend"), which the hook
# forces on the whole program when collect asks for a kernel's reference.
PALLAS_RUN = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def head(x):
        return pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1

    print(float(head(jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128))[0, 1]))
    print(float(head(jnp.ones((8, 128), jnp.float32))[0, 0]))
    print(float(head(jnp.ones((16, 128), jnp.float32))[0, 0]))  # compiled again
    """
)


@pytest.mark.jax
def test_the_interpret_mode_run_keeps_the_named_calls_first_outputs(tmp_path: Path) -> None:
    (tmp_path / "pallas_run.py").write_text(PALLAS_RUN)
    env = hooked_env(tmp_path)
    bare = run([sys.executable, "pallas_run.py"], env, tmp_path)
    assert "Only interpret mode is supported" in bare.stderr  # compiled, on a CPU
    work = tmp_path / "interpret"
    (work / "dump").mkdir(parents=True)
    env = {**hooked_env(work), hook.ENV_PALLAS_INTERPRET: "jit_head"}
    done = run([sys.executable, str(tmp_path / "pallas_run.py")], env, work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["3.0", "3.0", "3.0"]
    (p,) = evidence_files.load(work)
    assert p.pallas_interpret == ""  # forced, no error
    (kept,) = [e for e in p.events if e.outputs is not None]
    assert kept.module == "jit_head"
    assert kept.outputs is not None
    with np.load(kept.outputs) as outputs:  # the first call's, not the second's
        expected = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) * 2 + 1
        assert np.array_equal(outputs["arr_0"], expected)
        assert list(outputs["arr_1"]) == ["float32"]  # the dtypes' names, last


@pytest.mark.jax
def test_the_interpret_mode_run_keeps_the_call_of_the_compile_asked_for(tmp_path: Path) -> None:
    (tmp_path / "pallas_run.py").write_text(PALLAS_RUN)
    (tmp_path / "dump").mkdir()
    shapes = "tensor<16x128xf32>"  # the second compile of head
    env = {**hooked_env(tmp_path), hook.ENV_PALLAS_INTERPRET: "jit_head",
           hook.ENV_PALLAS_SHAPES: shapes}  # fmt: skip
    done = run([sys.executable, "pallas_run.py"], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (p,) = evidence_files.load(tmp_path)
    (kept,) = [e for e in p.events if e.outputs is not None]
    assert kept.outputs is not None
    with np.load(kept.outputs) as outputs:
        assert outputs["arr_0"].shape == (16, 128)
    # Under the interpret mode the kernel is host callbacks, ordered by a token parameter
    # that the compiled module (whose types collect asks for) does not have.
    compiles = [e for e in p.events if e.kind == "compile" and e.module == "jit_head"]
    token = "!stablehlo.token"
    assert [e.shapes for e in compiles] == [f"{token}, tensor<8x128xf32>", f"{token}, {shapes}"]


def test_a_run_not_asked_loads_nothing_of_the_interpret_mode(
    hooked_program: tuple[Path, str],
) -> None:
    work, _ = hooked_program
    assert all(p.pallas_interpret is None for p in evidence_files.load(work))
    assert not list((work / evidence_files.PROCESSES).glob("*.outputs-*.npz"))
