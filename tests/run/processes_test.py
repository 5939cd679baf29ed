"""Choosing the failing process of a run, and what of its record a bundle and replay use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.bundles import stage as manifest_stage
from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.bundle import build
from xla_bugkit.bundle.manifest import validate
from xla_bugkit.errors import BadBundleError, ExitCode
from xla_bugkit.run import processes
from xla_bugkit.run.evidence import Event, ProcessEvidence

CRASH = "Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n"
STOPPED = "Thread 0x1 (most recent call first):\n"  # what a registered SIGTERM leaves


def proc(pid: int, *events: Event, **fields: object) -> ProcessEvidence:
    base: dict[str, object] = {"platform": "cpu", "exited": True, "rank": pid % 10}
    return ProcessEvidence(pid=pid, ppid=1, argv=(), events=events, **{**base, **fields})  # type: ignore[arg-type]


def compile_(
    module: str, *, ended: float | None = 2.0, id: int | None = None, **kw: object
) -> Event:
    return Event("compile", 1, module, id, started=1.0, ended=ended, **kw)  # type: ignore[arg-type]


def test_no_backend_no_culprit() -> None:
    launcher = ProcessEvidence(pid=1, ppid=0, argv=(), events=())
    assert processes.failing([launcher]) is None


def test_a_single_process_is_the_culprit_and_says_so() -> None:
    only = proc(5, compile_("jit_f"))
    culprit = processes.failing([only])
    assert culprit is not None and culprit.process is only and culprit.others == ()
    assert culprit.why == "the only process that started XLA" and culprit.label == "pid 5"


def test_the_rank_that_crashed_beats_the_rank_the_launcher_stopped() -> None:
    crashed = proc(11, compile_("jit_noisy", ended=None), stack=CRASH, exited=False,
                   processes=2)  # fmt: skip
    stopped = proc(10, Event("execute", 3, "jit_barrier", 4, started=9.0), stack=STOPPED,
                   exited=False, processes=2)  # fmt: skip
    culprit = processes.failing([stopped, crashed])
    assert culprit is not None and culprit.process is crashed
    assert culprit.why == "it crashed while compiling jit_noisy"
    assert culprit.label == "rank 1 of 2, pid 11"
    assert [o["pid"] for o in build.other_process_entries(culprit)] == [10]


def test_an_xla_error_beats_a_process_stopped_part_way() -> None:
    raised = proc(21, compile_("jit_f", error="JaxRuntimeError: INTERNAL: x"), exit_status=1)
    stopped = proc(22, compile_("jit_g", ended=None), stack=STOPPED, exited=False)
    culprit = processes.failing([stopped, raised])
    assert culprit is not None and culprit.process is raised
    assert culprit.why.startswith("XLA raised while compiling jit_f")


def test_where_none_recorded_a_failure_the_one_its_evidence_names_is_chosen() -> None:
    """A process pool's worker ran out of memory; the pool raised the error again in the
    parent, and every worker ended normally. The worker whose dumps plan the allocation
    that failed is the one, not the first to start XLA."""
    workers = [proc(pid, compile_(f"jit_fit_{pid}")) for pid in (31, 32, 33)]
    wide = workers[2]

    def named(p: ProcessEvidence) -> str | None:
        return (
            "module_0020.jit_fit in its dumps plans the 2,161,279,680 bytes" if p is wide else None
        )

    culprit = processes.failing(workers, named)
    assert culprit is not None and culprit.process is wide
    assert culprit.why == (
        "no process recorded a failure, but module_0020.jit_fit in its dumps plans the "
        "2,161,279,680 bytes"
    )
    # Named by none, or by two, it says nothing: the first to start XLA, as before.
    for names in (lambda p: None, lambda p: "plans it" if p is not workers[1] else None):
        fallback = processes.failing(workers, names)
        assert fallback is not None and fallback.process is workers[0]
        assert fallback.why == "no process recorded a failure; the first to start XLA"


def test_flags_in_force_leave_out_dump_flags_keep_empty_values() -> None:
    p = proc(1, env={"XLA_FLAGS": "--xla_dump_to=/w/dump --xla_dump_hlo_as_proto --xla_a= --b=1"})
    assert processes.flags_in_force(p) == ("--xla_a=", "--b=1")


def test_memory_cap_is_the_lowest_soft_limit() -> None:
    assert processes.memory_cap(proc(1)) is None
    p = proc(1, rlimits={"RLIMIT_AS": (3 << 30, -1), "RLIMIT_DATA": (-1, -1)})
    assert processes.memory_cap(p) == 3 << 30


def test_the_failing_process_folder_else_collects(tmp_path: Path) -> None:
    own = tmp_path / "dump" / "7"
    culprit = processes.failing([proc(7, dump_dir=own)])
    assert processes.dump_folder(tmp_path / "dump", culprit) == tmp_path / "dump"  # not there
    own.mkdir(parents=True)
    assert processes.dump_folder(tmp_path / "dump", culprit) == own
    assert processes.dump_folder(tmp_path / "dump", None) == tmp_path / "dump"


def test_dumps_sent_elsewhere_are_gathered_by_module_id(tmp_path: Path) -> None:
    elsewhere, folder = tmp_path / "mine", tmp_path / "dump"
    (elsewhere / "module_0004.jit_f").mkdir(parents=True)
    (elsewhere / "module_0004.jit_f" / "module.mlir").write_text("m")
    for name in ("module_0004.jit_f.before_optimizations.txt", "module_0006.jit_g.debug_options"):
        (elsewhere / name).write_text("x")
    folder.mkdir()
    p = proc(1, compile_("jit_f", id=4, dump_to=elsewhere))
    notes = processes.gather_elsewhere(p, folder)
    assert notes == [f"1 modules dumped by the program to {elsewhere} were gathered"]
    got = sorted(str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file())
    assert got == ["module_0004.jit_f.before_optimizations.txt", "module_0004.jit_f/module.mlir"]
    assert processes.gather_elsewhere(p, folder) == []  # already there: nothing copied twice


# --- real runs through collect ---------------------------------------------------------


@pytest.mark.slow
def test_a_shell_script_launching_python_is_bundled_from_the_python_process(
    tmp_path: Path,
) -> None:
    c = run_collect(tmp_path / "b.zip", ["sh", str(PROGRAMS / "run.sh")],
                    env={"PYTHON": sys.executable})  # fmt: skip
    assert c.returncode == ExitCode.OK, c.stderr[-3000:]
    m = c.manifest()
    assert m["process"]["why"] == "it crashed while compiling jit_add_noise"
    assert m["other_processes"] == [] and m["modules"][0]["name"] == "jit_add_noise"
    assert "failing process" not in c.stderr  # one process: the summary looks as it did


@pytest.mark.slow
def test_two_ranks_the_bundle_names_the_rank_that_failed(tmp_path: Path) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "two_ranks.py")])
    m = c.manifest()
    assert (m["process"]["rank"], m["process"]["processes"]) == (1, 2), c.stderr[-3000:]
    assert m["process"]["why"] == "it crashed while compiling jit__lambda"
    assert [o["rank"] for o in m["other_processes"]] == [0]
    assert m["modules"][0]["name"] == "jit__lambda"
    assert m["xla_flags"] == ["--xla_disable_all_hlo_passes=true"]  # rank 1's own flag
    assert "failing process: rank 1 of 2" in c.stderr
    # Rank 1's module names rank 1's device (2048); the replay compiles it for device 0.
    assert m["modules"][0]["replay"]["outcome"] == "reproduced: crash", c.stderr[-3000:]
    # Its jaxpr, from the folder of the process's own dumps (ranks number theirs alike).
    assert m["modules"][0]["files"]["jaxpr"].endswith("__lambda_.jaxpr.txt")


@pytest.mark.slow
def test_sharded_over_four_forced_devices_records_the_device_count(tmp_path: Path) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "sharded.py")])
    assert c.returncode == ExitCode.OK, c.stderr[-3000:]
    m = c.manifest()
    assert m["process"]["devices"] == 4
    assert "--xla_force_host_platform_device_count=4" in m["xla_flags"]
    assert m["modules"][0]["replay"]["outcome"] == "reproduced: crash"
    # The environment report lists the devices the program saw (its own flag made four),
    # from the hook's record: no probe of a fresh jax, which would see one.
    env = c.text("environment.txt")
    assert "device info: cpu-4, 4 local devices, backend cpu, process_count 1 (as the program" \
        in env  # fmt: skip
    assert env.count("kind='cpu'") == 4


def test_the_manifests_process_records_validate_and_old_manifests_still_load(
    tmp_path: Path,
) -> None:
    crashed = proc(11, compile_("jit_f", ended=None), stack=CRASH, exited=False, processes=2,
                   devices=2, rlimits={"RLIMIT_AS": (1 << 31, -1)})  # fmt: skip
    culprit = processes.failing([crashed, proc(10, processes=2)])
    assert culprit is not None
    (tmp_path / "f").mkdir()
    base = manifest_stage(tmp_path / "f")
    validate(base)  # an older manifest has neither key
    record = build.process_entry(culprit)
    assert record == {"pid": 11, "rank": 1, "processes": 2, "devices": 2, "platform": "cpu",
                      "why": "it crashed while compiling jit_f", "memory_cap": 1 << 31}  # fmt: skip
    others = build.other_process_entries(culprit)
    validate({**base, "process": record, "other_processes": others})
    with pytest.raises(BadBundleError, match="the process record: 'memory_cap'"):
        validate({**base, "process": {**record, "memory_cap": -5}})
    with pytest.raises(BadBundleError, match=r"other_processes\[0\] has no 'ended'"):
        validate({**base, "other_processes": [{"pid": 1, "rank": 0}]})
