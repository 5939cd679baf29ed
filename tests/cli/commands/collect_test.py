"""End to end: the installed ``xla-bugkit`` command on real failing programs.

Each program fails inside XLA for real (see tests/programs/); each collect runs once per
session and several tests read its bundle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import (
    PROGRAMS,
    READY_TIMEOUT,
    XLA_BUGKIT,
    Collected,
    run_collect,
    wait_for_child,
)
from tests.helpers.replay_children import needs_proc, replay_children, tagged_env, wait_for_replay
from xla_bugkit.cli.main import main
from xla_bugkit.failure.record import HANG_REPLAY_MARGIN_SECONDS

pytestmark = pytest.mark.slow  # real jax programs, end to end

FAKE_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def collect(
    tmp: Path, program: str, *extra: str, env: dict[str, str] | None = None, name: str = ""
) -> Collected:
    out = tmp / (name or f"{program}.zip")
    return run_collect(out, [sys.executable, str(PROGRAMS / f"{program}.py")], *extra, env=env)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("collect")


@pytest.fixture(scope="module")
def compile_crash(tmp: Path) -> Collected:
    # A fake secret in the environment and on the command line must not reach the bundle.
    env = {"MY_API_TOKEN": FAKE_TOKEN, "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    return collect(tmp, "compile_crash", env=env)


@pytest.fixture(scope="module")
def runtime_error(tmp: Path) -> Collected:
    return collect(tmp, "runtime_error")


@pytest.fixture(scope="module")
def compile_error(tmp: Path) -> Collected:
    return collect(tmp, "compile_error")


@pytest.fixture(scope="module")
def hang(tmp: Path) -> Collected:
    """A program stuck inside XLA's execution, stopped with SIGTERM (as a user might) only
    once it says it is there: how fast jax imports does not matter."""
    out, ready = tmp / "hang.zip", tmp / "hang.ready"
    argv = [XLA_BUGKIT, "collect", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / "hang.py"), str(ready)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    try:
        wait_for_child(ready, child)
    finally:
        child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=READY_TIMEOUT)
    return Collected(child.returncode, stderr, out)


def module_files(c: Collected, label_end: str) -> list[str]:
    (module,) = [m for m in c.manifest()["modules"] if m["label"].endswith(label_end)]
    return [n for n in c.names() if n.startswith(f"modules/{module['label']}/")]


def assert_report_files(c: Collected, name: str) -> None:
    files = module_files(c, name)
    assert any(f.endswith(".before_optimizations.txt") for f in files)
    assert any(f.endswith(".before_optimizations.hlo.pb") for f in files)
    assert any(f.endswith("after_optimizations-buffer-assignment.txt") for f in files)
    assert {"ISSUE.md", "manifest.json", "log.txt", "environment.txt"} <= set(c.names())


def test_compile_crash_bundle(compile_crash: Collected) -> None:
    assert compile_crash.returncode == 0, compile_crash.stderr
    # XLA's log lines that collect turned on reach neither the terminal nor the bundle's log.
    assert "] Dumping module_" not in compile_crash.stderr
    assert "] Dumping module_" not in compile_crash.text("log.txt")
    assert "Check failed: const_instr == nullptr" in compile_crash.text("log.txt")
    m = compile_crash.manifest()
    assert m["failure"]["kind"] == "compile crash"
    assert m["failure"]["signal"] == "SIGABRT"
    assert m["failure"]["site"] == "buffer_assignment_util.cc:46"
    (module,) = m["modules"]
    assert module["name"] == "jit_add_noise"
    # The process's own record, XLA's log (by module number), JAX's compile log (by name).
    hook, *logs = module["reasons"]
    assert hook.startswith("XLA was compiling it (jit(add_noise) on ")
    assert hook.endswith(") when the process stopped")
    assert logs == [
        f"XLA's log: {module['label']}.debug_options was the last file dumped before its first "
        "fatal line (buffer_assignment_util.cc:46)",
        "JAX was compiling jit(add_noise) when the run stopped",
    ]
    assert module["replay"]["outcome"] == "reproduced: crash"
    assert_report_files(compile_crash, "jit_add_noise")
    assert (
        "selected module_" in compile_crash.stderr and "reproduced: crash" in compile_crash.stderr
    )
    link = "https://github.com/jax-ml/jax/issues/new?template=none&title="
    assert f"on jax-ml/jax, paste ISSUE.md and attach the bundle: {link}" in compile_crash.stderr
    assert "| gh issue create --repo jax-ml/jax --title " in compile_crash.stderr
    assert "  shares: " in compile_crash.stderr and "module files" in compile_crash.stderr


def test_issue_text_follows_the_jax_bug_form(compile_crash: Collected) -> None:
    issue = compile_crash.text("ISSUE.md")
    assert "### Description" in issue
    assert "### System info (python version, jaxlib version, accelerator, etc.)" in issue
    assert "xla-bugkit verify compile_crash.zip" in issue
    assert "buffer_assignment_util.cc:46" in issue
    assert "reproduced: crash" in issue


def test_manifest_hashes_every_file(compile_crash: Collected) -> None:
    listed = {f["path"] for f in compile_crash.manifest()["files"]}
    assert listed == set(compile_crash.names()) - {"manifest.json"}


def test_the_reports_log_is_the_programs_not_xlas_dump_lines(compile_crash: Collected) -> None:
    # collect switches XLA's "Dumping module_..." lines on; the report shows what the run
    # printed around its failure (run.log in the work dir keeps them all).
    report = compile_crash.text("ISSUE.md")
    assert "Check failed: const_instr == nullptr" in report
    assert "] Dumping " not in report and "dump.cc" not in report


def test_the_runs_own_flags_are_named_first_as_the_cause(compile_crash: Collected) -> None:
    # The user's flag and the program's own: the module is replayed once without them, and
    # compiles and runs; that is said before any issue link, and kept in the bundle's notes.
    finding = (
        "this run set its own XLA flags (--xla_cpu_enable_fast_math=false "
        "--xla_disable_all_hlo_passes=true); without them the module compiles and runs, and "
        "with --xla_disable_all_hlo_passes=true alone it fails the same way: say so in the "
        "report"
    )
    summary = compile_crash.stderr[compile_crash.stderr.rindex("\nxla-bugkit: ") :]
    assert summary.splitlines()[2].startswith(f"  first: {finding}")
    assert summary.index("  first: ") < summary.index("open a new issue")
    assert any(note.startswith(finding) for note in compile_crash.manifest()["notes"])
    # And in the report, where a maintainer reads it: the Command block shows no flag.
    assert "**First:** this run set its own XLA flags" in compile_crash.text("ISSUE.md")


def test_users_flags_are_kept_and_secrets_never_shipped(compile_crash: Collected) -> None:
    # The user's flag, then the one the program appended itself (the flags in force).
    assert compile_crash.manifest()["xla_flags"] == [
        "--xla_cpu_enable_fast_math=false",
        "--xla_disable_all_hlo_passes=true",
    ]
    with zipfile.ZipFile(compile_crash.bundle) as z:
        for name in z.namelist():
            assert FAKE_TOKEN.encode() not in z.read(name), name
    assert "MY_API_TOKEN" not in compile_crash.text("environment.txt")


def test_compile_error_bundle(compile_error: Collected) -> None:
    assert compile_error.returncode == 0, compile_error.stderr
    m = compile_error.manifest()
    assert m["failure"]["kind"] == "compile error"
    assert m["failure"]["status_code"] == "INTERNAL"
    assert [x["name"] for x in m["modules"]] == ["jit_train_step"]
    assert m["modules"][0]["replay"]["outcome"] == "reproduced: error"


def test_runtime_error_bundle(runtime_error: Collected) -> None:
    # Reproduced; 4 TiB is more than the machine has: not XLA's bug, so 3 and no link.
    assert runtime_error.returncode == 3, runtime_error.stderr
    m = runtime_error.manifest()
    assert m["blame"]["whose"] == "not xla" and "issues/new" not in runtime_error.stderr
    assert m["failure"]["kind"] == "runtime error"
    assert m["failure"]["status_code"] == "RESOURCE_EXHAUSTED"
    (module,) = m["modules"]
    assert module["name"] == "jit_make_buffer"
    assert module["replay"]["outcome"] == "reproduced: error"
    assert module["replay"]["inputs"] == "snapshot"
    assert_report_files(runtime_error, "jit_make_buffer")
    assert any(".snapshot." in f for f in module_files(runtime_error, "jit_make_buffer"))


def test_hang_bundle(hang: Collected) -> None:
    # hang.py's loop condition never turns false: its replay computes without end, which
    # proves no hang of XLA's (unproven: exit 3, no link).
    assert hang.returncode == 3, hang.stderr
    assert hang.manifest()["blame"]["whose"] == "unproven" and "issues/new" not in hang.stderr
    # Once when the program ends, the headline once in the summary.
    assert "the program ended: hang\n" in hang.stderr
    ended = "xla-bugkit: hang: XLA was executing jit(spin) with no output for "
    assert hang.stderr.count(ended) == 1 and "; stopped by the user after " in hang.stderr
    m = hang.manifest()
    failure = m["failure"]
    assert failure["kind"] == "hang"
    assert (failure["executing"], failure["stopped_by"]) == ("spin", "user")
    assert 0 <= failure["stalled_seconds"] <= failure["ran_seconds"]
    (module,) = m["modules"]
    assert module["name"] == "jit_spin"
    assert module["replay"]["outcome"] == "reproduced: hang"
    # Once it ran the module, the replay waited as long as the run went without output,
    # half again, and a margin; and it was computing all that time.
    bound = failure["stalled_seconds"] * 1.5 + HANG_REPLAY_MARGIN_SECONDS
    evidence = module["replay"]["evidence"]
    assert evidence.startswith(f"no result within {bound:g} s of running it, computing all along")
    assert main(["verify", "-q", str(hang.bundle)]) == 0  # verify waits as long


def test_success_says_no_failure(tmp: Path) -> None:
    c = collect(tmp, "success")
    assert c.returncode == 5
    assert "no failure seen" in c.stderr
    assert not c.bundle.exists()


def test_success_bundles_with_always(tmp: Path) -> None:
    c = collect(tmp, "success", "--always", "--no-replay")
    assert c.returncode == 5
    (module,) = c.manifest()["modules"]
    assert module["name"] == "jit_train_step"
    assert "no failure seen" in module["reasons"][0]


def test_no_data_leaves_snapshots_out(tmp: Path) -> None:
    c = collect(tmp, "runtime_error", "--no-data", name="nodata.zip")
    assert not any(".snapshot." in n for n in c.names())
    assert c.manifest()["data"] == "no input data (--no-data)"
    assert c.manifest()["modules"][0]["replay"]["inputs"].startswith("generated")


def test_default_output_is_7z_and_says_github_needs_zip(tmp: Path) -> None:
    argv = [XLA_BUGKIT, "collect", "--no-replay", "--",
            sys.executable, str(PROGRAMS / "compile_error.py")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=600)
    assert done.returncode == 3, done.stderr  # bundle written, no replay to prove it
    assert (tmp / "bundle.7z").stat().st_size > 0
    assert "GitHub does not accept .7z" in done.stderr
    assert "xla-bugkit repack bundle.7z bundle.zip" in done.stderr
    assert main(["repack", str(tmp / "bundle.7z"), str(tmp / "repacked.zip")]) == 0
    assert zipfile.is_zipfile(tmp / "repacked.zip")


def test_size_budget_drops_in_the_documented_order(tmp: Path) -> None:
    c = collect(tmp, "runtime_error", "--no-replay", "--max-size", "9kB", name="small.zip")
    m = c.manifest()
    left_out = [n.split(": ", 1)[1] for n in m["notes"] if n.startswith("left out to fit")]
    assert left_out, m["notes"]
    # The snapshot (real inputs) goes before the first module's extra files.
    assert ".snapshot." in left_out[0]
    assert c.bundle.stat().st_size <= 9000 or "nothing left to drop" in c.stderr
    assert set(left_out).isdisjoint(c.names())
    assert_report_files(c, "jit_make_buffer")
    assert "over the size budget: leaving out" in c.stderr
    assert m["data"] == "no real inputs: the snapshots were left out to fit the size budget"


def test_sigterm_outside_xla_stops_the_program_and_still_bundles(tmp: Path) -> None:
    """The program waits in Python after its jax work: stopped, it is no hang of XLA's."""
    out = tmp / "interrupted.zip"
    argv = [XLA_BUGKIT, "collect", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / "sleep_hang.py")]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert child.stdout is not None
    # The program's own output comes through collect: "ready" once its jax work is done.
    assert "ready\n" in iter(child.stdout.readline, ""), "collect ended before the program"
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=READY_TIMEOUT)
    assert child.returncode == 130, stderr
    assert "the program ended: interrupted\n" in stderr
    assert "interrupted: stopped by the user" in stderr
    c = Collected(child.returncode, stderr, out)
    assert c.manifest()["failure"]["kind"] == "interrupted"
    assert [m["name"] for m in c.manifest()["modules"]] == ["jit_scale"]


def _stopped_after(out: Path, program: str, line: str, cwd: Path | None = None) -> tuple[str, dict]:  # type: ignore[type-arg]
    """collect (replays of at most 60 s) on ``python PROGRAM``, stopped with SIGTERM once the
    program has printed ``line``, as a user stops a hang: its stderr and the manifest."""
    argv = [XLA_BUGKIT, "collect", "--replay-timeout", "60", "-o", str(out), "--",
            sys.executable, program]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=cwd, env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert child.stdout is not None
    assert line in iter(child.stdout.readline, ""), "collect ended before the program"
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=READY_TIMEOUT)
    return stderr, Collected(child.returncode, stderr, out).manifest()


@pytest.mark.slow
def test_a_later_call_that_never_ends_is_found_and_replayed_on_its_own_inputs(tmp: Path) -> None:
    """jit(solve)'s second call hangs; jax dispatched it from C++, unseen by the hook, and
    its first call's inputs converge. Asked before the stop, the program names the call and
    its arguments, and the replay on them hangs as the run did."""
    stderr, m = _stopped_after(
        tmp / "later.zip",
        "solve.py",
        "solving again to a residual of 1e-09\n",
        cwd=PROGRAMS / "shapes" / "later_call_hang",
    )
    assert m["failure"]["kind"] == "hang", stderr
    assert "jax ran through its C++ fast path" in m["failure"]["evidence"]
    first = m["modules"][0]
    assert first["name"] == "jit_solve", stderr
    assert first["replay"]["outcome"] == "reproduced: hang", stderr
    assert "the call solve(a, b, tolerance) at solve.py:49" in stderr


@pytest.mark.slow
def test_a_hung_call_whose_inputs_were_rebound_is_read_in_a_second_run(tmp: Path) -> None:
    """jit(solve)'s second call hangs after returning (XLA runs it on its own threads), and
    by the stop `x` names its output: its inputs cannot be read. collect runs the program
    again with XLA's snapshot of every execution, under which the call holds its thread,
    reads the inputs there, and the replay on them hangs."""
    program = str(PROGRAMS / "later_hang_rebound.py")
    stderr, m = _stopped_after(tmp / "rebound.zip", program, "solving to a residual of 1e-09\n")
    assert "running the program again with XLA's snapshot of every execution" in stderr
    assert any(n.startswith("the program ran twice: ") for n in m["notes"]), m["notes"]
    assert m["failure"]["kind"] == "hang", stderr
    assert not m["failure"]["unread_inputs"]
    assert "inside the call solve(a, b, x, tolerance)" in m["failure"]["evidence"]
    first = m["modules"][0]
    assert first["name"] == "jit_solve", stderr
    assert first["replay"]["outcome"] == "reproduced: hang", stderr


def test_wrong_result_from_a_public_bug_report(tmp: Path) -> None:
    """jax-ml/jax#39103: XLA CPU's YNN fusion gives a wrong element; op-by-op is right."""
    c = collect(tmp, "wrong_result", "--module", r"\.jit_f$")
    assert c.returncode == 0, c.stderr
    m = c.manifest()
    assert m["failure"]["kind"] == "wrong result"  # the program's own check exits 1
    outcomes = {x["replay"]["outcome"] for x in m["modules"]}
    assert "reproduced: wrong result" in outcomes
    wrong = next(x for x in m["modules"] if x["replay"]["outcome"] == "reproduced: wrong result")
    assert wrong["replay"]["numbers"]["reference"] == "op-by-op"
    assert "op-by-op reference" in wrong["replay"]["evidence"]
    assert main(["verify", "-q", str(c.bundle)]) == 0  # the maintainer sees it too


def test_home_paths_never_leave_the_machine(tmp: Path) -> None:
    """The program lives under the home dir, so HLO metadata (text and protos) names it."""
    home = tmp / "home" / "alice-bugkit"
    project = home / "proj"
    project.mkdir(parents=True)
    program = project / "crash.py"
    program.write_text((PROGRAMS / "compile_error.py").read_text())
    out = tmp / "home.zip"
    argv = [XLA_BUGKIT, "collect", "-q", "-o", str(out), "--", sys.executable, str(program)]
    env = {**os.environ, "HOME": str(home), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    # -q: what happened, the bundle, and what to do with it; not every reason and file.
    summary = done.stderr[done.stderr.index("xla-bugkit: compile error") :]
    assert "\n  bundle: " in summary and "\n  next: " in summary
    assert "  selected " not in summary and "  shares: " not in summary
    c = Collected(done.returncode, done.stderr, out)
    with zipfile.ZipFile(out) as z:
        for name in z.namelist():
            assert str(home).encode() not in z.read(name), name
            assert b"alice-bugkit" not in z.read(name), name
    assert "~/proj/crash.py" in c.text("log.txt") or "~/proj/crash.py" in c.text("ISSUE.md")
    assert any(n.startswith("redacted: ") and "home path" in n for n in c.manifest()["notes"])
    # The rewritten protos still replay: the maintainer sees the same failure.
    verify = subprocess.run([XLA_BUGKIT, "verify", "-q", str(out)], capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_dump_files_cut_short_by_a_file_size_limit(tmp: Path) -> None:
    """XLA goes on after a dump write fails; the cut-short files must not reach the bundle."""
    limited = f"ulimit -f 4; exec {sys.executable} {PROGRAMS / 'compile_crash.py'}"
    out = tmp / "limited.zip"
    argv = [XLA_BUGKIT, "collect", "-o", str(out), "--", "bash", "-c", limited]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode in (0, 3), done.stderr
    assert "dump files (File too large); they are left out" in done.stderr
    c = Collected(done.returncode, done.stderr, out)
    m = c.manifest()
    assert m["failure"]["kind"] == "compile crash"
    assert any("could not write" in n for n in m["notes"])
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None


def test_a_bundle_that_cannot_be_written_keeps_the_run(
    tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output folder is gone by the end (the program removes it): the run is not lost."""
    out_dir, work = tmp / "unwritable", tmp / "unwritable-run"
    out_dir.mkdir()
    out = out_dir / "bug.zip"
    program = f"rm -r {out_dir} && exec {sys.executable} {PROGRAMS / 'compile_error.py'}"
    argv = [XLA_BUGKIT, "collect", "-q", "--no-replay", "-o", str(out), "--workdir", str(work),
            "--", "bash", "-c", program]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 1, done.stderr
    assert done.stderr.endswith(
        f"xla-bugkit: error: cannot write {out}: No such file or directory; the run is kept "
        f"in {work}: once that is fixed, make the bundle with: xla-bugkit bundle {work} "
        f"-o {out} --no-replay\n"
    )
    assert {p.name for p in work.iterdir()} == {"dump", "run.log", "run.json", "processes"}
    out_dir.mkdir()
    assert main(["bundle", "-q", str(work), "-o", str(out)]) == 0
    c = Collected(0, capsys.readouterr().err, out)
    assert c.manifest()["failure"]["kind"] == "compile error"
    assert c.manifest()["modules"][0]["replay"]["outcome"] == "reproduced: error"


def test_a_replaced_dump_to_keeps_the_dumps_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs, work = tmp_path / "my-dumps", tmp_path / "run"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={theirs}")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    argv = ["collect", "-q", "-o", str(tmp_path / "b.zip"), "--workdir", str(work),
            "--", sys.executable, str(PROGRAMS / "success.py")]  # fmt: skip
    assert main(argv) == 5
    err = capsys.readouterr().err
    assert err.endswith(
        f"  your dumps: {work / 'dump'} (your --xla_dump_to={theirs} was replaced for this "
        "run: nothing was written there)\n"
        f"  work dir kept: {work} (a bundle from it again: xla-bugkit bundle {work} -o OUT)\n"
    )
    assert any(p.name.endswith(".jit_train_step.before_optimizations.txt")
               for p in (work / "dump").iterdir())  # fmt: skip
    assert not theirs.exists()


def test_the_python_api_on_a_program_that_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xla_bugkit import CollectOptions, collect
    from xla_bugkit.ui import Ui

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    options = CollectOptions(output=tmp_path / "bug.zip", workdir=tmp_path / "run")
    result = collect([sys.executable, str(PROGRAMS / "success.py")], options, Ui(verbosity=-1))
    assert result.exit_code == 5
    assert [c.module.label for c in result.selection.chosen] == []  # the README's snippet
    assert result.selection.others == ()
    assert (result.bundle, result.manifest, result.workdir) == (None, None, None)
    assert result.run.failure.kind.value == "success"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # emptied, nothing written


@needs_proc
def test_ctrl_c_during_the_replay_stops_it_and_still_bundles(tmp: Path) -> None:
    out, work = tmp / "replay-interrupted.zip", tmp / "replay-interrupted-run"
    tag, env = tagged_env()
    argv = [XLA_BUGKIT, "collect", "-q", "-o", str(out), "--workdir", str(work),
            "--module", "jit_spin", "--replay-timeout", "3600",
            "--", sys.executable, str(PROGRAMS / "compiled_hang.py")]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env)  # fmt: skip
    wait_for_replay(tag, child)  # jit_spin never ends: the replay runs until stopped
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=600)
    assert child.returncode == 130, stderr
    assert "xla-bugkit: stopping the replay (Ctrl-C again to abort)\n" in stderr
    note = "the replay was interrupted: 0 of 1 chosen modules replayed"
    assert f"xla-bugkit: warning: {note}\n" in stderr
    m = Collected(130, stderr, out).manifest()
    assert note in m["notes"]
    assert [(x["name"], x["replay"]) for x in m["modules"]] == [("jit_spin", None)]
    assert replay_children(tag) == []
    # The run's files go, as after any bundle: moved aside at once, deleted in the background.
    assert all(p.name.startswith(".removing-") for p in work.iterdir())
    deadline = time.monotonic() + READY_TIMEOUT  # a bound on waiting, never a measure
    while any(work.iterdir()):
        assert time.monotonic() < deadline, sorted(p.name for p in work.iterdir())
        time.sleep(0.05)


def test_the_work_dir_is_gone_when_collect_returns_and_its_deletion_ends_after(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    c = collect(tmp_path, "compile_error", "--no-replay", env={"XDG_CACHE_HOME": str(cache)})
    assert c.returncode == 3, c.stderr  # bundled; not replayed, so not proved
    runs = cache / "xla-bugkit" / "runs"
    # The run's folder was renamed before collect returned; its deletion may still be going.
    assert all(p.name.startswith(".removing-") for p in runs.iterdir())
    deadline = time.monotonic() + READY_TIMEOUT  # a bound on waiting, never a measure
    while any(runs.iterdir()):
        assert time.monotonic() < deadline, sorted(p.name for p in runs.iterdir())
        time.sleep(0.05)
    assert c.manifest()["failure"]["kind"] == "compile error"


@pytest.mark.jax
def test_a_relative_workdir_holds_when_the_program_changes_directory(tmp_path: Path) -> None:
    # A job script that cds into its own run folder first: the dumps must still land in the
    # work dir the user named, relative to where collect was started.
    program = tmp_path / "job.py"
    program.write_text(
        "import os, runpy, sys\n"
        "os.makedirs('run-1', exist_ok=True)\n"
        "os.chdir('run-1')\n"
        f"runpy.run_path({str(PROGRAMS / 'compile_crash.py')!r}, run_name='__main__')\n"
    )
    argv = [sys.executable, str(program)]
    done = run_collect(tmp_path / "b.zip", argv, "--workdir", "work", "--keep-workdir",
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.manifest()["modules"][0]["name"] == "jit_add_noise"
    assert (tmp_path / "work" / "dump").is_dir()
    assert not (tmp_path / "run-1" / "work").exists()


@pytest.mark.jax
def test_options_passed_to_one_compile_are_named_first_as_the_cause(tmp_path: Path) -> None:
    # jax.jit(f, compiler_options=...) reaches XLA without XLA_FLAGS: the hook records it.
    out = tmp_path / "b.zip"
    done = run_collect(out, [sys.executable, str(PROGRAMS / "compile_options_crash.py")])
    assert done.returncode == 0, done.stderr
    finding = (
        "the program compiled jit(sample_noise) with XLA options of its own (compiler_options: "
        "--xla_disable_hlo_passes=copy-insertion); without them the module compiles and runs"
    )
    assert f"  first: {finding}" in done.stderr
    manifest = done.manifest()
    assert manifest["xla_flags"] == []  # no flag of the run's
    first = manifest["modules"][0]
    assert first["name"] == "jit_sample_noise"
    assert first["compiler_options"] == ["--xla_disable_hlo_passes=copy-insertion"]
    assert f"**First:** {finding}" in done.text("ISSUE.md")
    verified = subprocess.run(
        [XLA_BUGKIT, "verify", str(out)], capture_output=True, text=True, timeout=600
    )
    assert verified.returncode == 0, verified.stderr
    assert (
        f"the reporter's own compile options of {first['label']}, applied to its replay: "
        "--xla_disable_hlo_passes=copy-insertion"
    ) in verified.stdout


def test_a_wrong_results_own_flags_say_whether_the_result_agrees_without_them() -> None:
    from xla_bugkit.bundle.own_flags import OwnFlags
    from xla_bugkit.verdict import Outcome, Verdict

    agreed = Verdict(
        "module_0008.jit_integrate",
        Outcome.NOT_REPRODUCED,
        "ran to completion; result agrees with op-by-op, conservative flags",
        "snapshot",
        numbers={"reference": "op-by-op, conservative flags"},
    )
    own = OwnFlags(("--xla_disable_hlo_passes=copy-insertion",), agreed, wrong_result=True)
    assert own.finding().startswith(
        "this run set its own XLA flags (--xla_disable_hlo_passes=copy-insertion); without "
        "them its result agrees with its references (op-by-op, conservative flags): check"
    )
    # Both the run's flags and options passed to the module's own compile.
    both = OwnFlags(
        ("--xla_cpu_enable_fast_math=true",),
        agreed,
        wrong_result=True,
        options=("--xla_cpu_fast_math_honor_nans=false",),
        module="jit_integrate",
    )
    assert both.finding().startswith(
        "this run set its own XLA flags (--xla_cpu_enable_fast_math=true) and compiled "
        "jit(integrate) with options of its own (compiler_options: "
        "--xla_cpu_fast_math_honor_nans=false); without them its result agrees"
    )


def test_a_manifests_compiler_options_are_shown_only_when_they_are_lists_of_strings() -> None:
    from xla_bugkit.verify.run import _compiler_options

    modules = [
        {"label": "module_0001.jit_a", "compiler_options": ["--xla_disable_hlo_passes=x"]},
        {"label": "module_0002.jit_b", "compiler_options": "--xla_dump_to=/etc"},
        {"label": "module_0003.jit_c", "compiler_options": [1, 2]},
        {"label": "module_0004.jit_d"},
    ]
    assert _compiler_options(modules) == (("module_0001.jit_a", ("--xla_disable_hlo_passes=x",)),)


def test_the_programs_own_error_in_xlas_words_is_not_filed_as_xlas(tmp: Path) -> None:
    """tests/programs/own_status_words.py raises its own ``RuntimeError("INTERNAL: Check
    failed: ...")`` after jax's correct results: a non-XLA failure, with no issue link."""
    done = collect(tmp, "own_status_words")
    assert done.returncode == 3, done.stderr
    assert "xla-bugkit: non-XLA failure: RuntimeError: INTERNAL: Check failed: layout_ok" in (
        done.stderr
    )
    assert ", raised by the program itself in verify (own_status_words.py:25)" in done.stderr
    assert "no issue link" in done.stderr and "issues/new" not in done.stderr
    assert "XLA returned the status" not in done.stderr
