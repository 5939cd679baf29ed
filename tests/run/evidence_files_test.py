"""The reader of what each process recorded: written here as the hook writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xla_bugkit.run import evidence_files


def write(work: Path, pid: int, *records: dict[str, Any], damaged: bool = False) -> Path:
    folder = work / evidence_files.PROCESSES
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pid}.jsonl"
    lines = [json.dumps(r) for r in records]
    text = "\n".join(lines) + "\n" + ('{"e": "execute", "n": 9' if damaged else "")
    path.write_text(text)
    return path


def start(pid: int, t: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {"e": "start", "t": t, "pid": pid, "ppid": 1, "argv": ["x.py"], "cwd": "/", **extra}


def touch_dump(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("")


def test_no_folder_no_processes(tmp_path: Path) -> None:
    assert evidence_files.load(tmp_path) == ()


def test_a_crashed_process_its_unfinished_compile_and_damaged_last_line(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    touch_dump(
        dump,
        "module_0000.jit_f.before_optimizations.txt",
        "module_0002.jit_g.before_optimizations.hlo.pb",
        "module_0004.jit_f.before_optimizations.txt",
    )
    write(
        tmp_path, 10,
        start(10, rlimits={"RLIMIT_AS": [-1, -1]}),
        {"e": "backend", "t": 2, "platform": "cpu", "rank": 0, "processes": 1, "devices": 4,
         "local_devices": 4, "env": {"XLA_FLAGS": "--xla_foo= --xla_dump_to=" + str(dump)},
         "dump_dir": str(dump)},
        {"e": "compile", "t": 3, "n": 1, "module": "jit_f", "fun": "jit(f)", "id": None},
        {"e": "compiled", "t": 4, "n": 1},
        {"e": "execute", "t": 5, "n": 2, "module": "jit_f", "c": 1},
        {"e": "executed", "t": 6, "n": 2, "error": "JaxRuntimeError: INTERNAL: boom"},
        {"e": "compile", "t": 7, "n": 3, "module": "jit_g", "id": None},
        {"e": "compiled", "t": 8, "n": 3},
        {"e": "compile", "t": 9, "n": 4, "module": "jit_f", "id": None, "shapes": "tensor<4xf32>"},
        {"e": "rlimit", "t": 9.5, "name": "RLIMIT_AS", "soft": 1 << 30, "hard": -1},
        damaged=True,
    )  # fmt: skip
    stack = tmp_path / evidence_files.PROCESSES / "10.stack.txt"
    stack.write_text("Fatal Python error: Aborted\n")
    (p,) = evidence_files.load(tmp_path)
    assert (p.pid, p.rank, p.devices, p.local_devices, p.platform) == (10, 0, 4, 4, "cpu")
    assert p.env["XLA_FLAGS"].startswith("--xla_foo= ")  # the empty value is kept
    assert p.dump_dir == dump and p.stack is not None and not p.exited
    assert p.rlimits["RLIMIT_AS"] == (1 << 30, -1)  # the last value set
    # Ids come from the dump folder: the second jit_f compiled is module 4, not module 0.
    assert [(e.kind, e.module, e.id) for e in p.events] == [
        ("compile", "jit_f", 0), ("execute", "jit_f", 0), ("compile", "jit_g", 2),
        ("compile", "jit_f", 4),
    ]  # fmt: skip
    assert p.events[1].error == "JaxRuntimeError: INTERNAL: boom" and p.events[1].finished
    assert p.unfinished == p.events[3] and p.unfinished.shapes == "tensor<4xf32>"


def test_dumps_sent_elsewhere_get_their_ids_from_that_folder(tmp_path: Path) -> None:
    dump, elsewhere = tmp_path / "dump", tmp_path / "mine"
    touch_dump(dump, "module_0000.jit_h.before_optimizations.txt")
    touch_dump(elsewhere, "module_0002.jit_f.before_optimizations.txt")
    write(
        tmp_path, 11, start(11),
        {"e": "backend", "t": 2, "platform": "cpu", "dump_dir": str(dump)},
        {"e": "compile", "t": 3, "n": 1, "module": "jit_h"},
        {"e": "compile", "t": 4, "n": 2, "module": "jit_f", "dump_to": str(elsewhere)},
    )  # fmt: skip
    (p,) = evidence_files.load(tmp_path)
    assert [(e.id, e.dump_to) for e in p.events] == [(0, None), (2, elsewhere)]


def test_an_accelerator_backend_describes_the_run_the_first_holds_the_flags(
    tmp_path: Path,
) -> None:
    write(
        tmp_path, 12, start(12),
        {"e": "backend", "t": 2, "platform": "cpu", "devices": 1, "env": {"XLA_FLAGS": "--a=1"}},
        {"e": "backend", "t": 3, "platform": "cuda", "devices": 8, "rank": 3, "env": {}},
        {"e": "exit", "t": 4, "status": 1},
    )  # fmt: skip
    (p,) = evidence_files.load(tmp_path)
    assert (p.platform, p.devices, p.rank, p.env) == ("cuda", 8, 3, {"XLA_FLAGS": "--a=1"})
    assert p.exited and p.exit_status == 1 and p.events == ()


def test_processes_in_start_order_files_without_start_skipped(tmp_path: Path) -> None:
    write(tmp_path, 30, start(30, t=5.0))
    write(tmp_path, 20, start(20, t=3.0))
    write(tmp_path, 40, {"e": "compile", "n": 1, "module": "jit_f"})
    assert [p.pid for p in evidence_files.load(tmp_path)] == [20, 30]


def test_a_compiles_own_options_are_read_and_hostile_ones_left_out(tmp_path: Path) -> None:
    from xla_bugkit.run.processes import compile_options

    write(
        tmp_path, 11,
        start(11),
        {"e": "compile", "t": 2, "n": 1, "module": "jit_f", "id": None,
         "options": ["--xla_disable_hlo_passes=algsimp", 7, {"x": 1}]},
        {"e": "compiled", "t": 3, "n": 1},
        {"e": "compile", "t": 4, "n": 2, "module": "jit_f", "id": None,
         "options": ["--xla_disable_hlo_passes=copy-insertion", "--xla_cpu_enable_fast_math=true"]},
        {"e": "compile", "t": 5, "n": 3, "module": "jit_g", "id": None, "options": "not a list"},
    )  # fmt: skip
    (p,) = evidence_files.load(tmp_path)
    # A later value of a name replaces the earlier one.
    assert compile_options(p, "jit_f") == (
        "--xla_disable_hlo_passes=copy-insertion",
        "--xla_cpu_enable_fast_math=true",
    )
    assert compile_options(p, "jit_g") == () == compile_options(p, "jit_h")


def test_a_compiles_options_are_its_modules_own_not_a_same_name_siblings(tmp_path: Path) -> None:
    from xla_bugkit.run.processes import compile_options

    # jit(score) for two shapes, from two threads: only the wide one with options.
    split = "--xla_cpu_parallel_codegen_split_count=0"
    write(
        tmp_path, 12,
        start(12),
        {"e": "compile", "t": 2, "n": 1, "module": "jit_score", "id": 34},
        {"e": "compile", "t": 3, "n": 2, "module": "jit_score", "id": 36, "options": [split]},
        {"e": "compiled", "t": 4, "n": 1},
        {"e": "compiled", "t": 5, "n": 2, "error": "JaxRuntimeError: INTERNAL: Too many"},
    )  # fmt: skip
    (p,) = evidence_files.load(tmp_path)
    assert compile_options(p, "jit_score", 34) == ()
    assert compile_options(p, "jit_score", 36) == (split,)
    assert compile_options(p, "jit_score") == (split,)  # by name alone: any of them


def test_an_execution_is_running_until_its_outputs_are_ready(tmp_path: Path) -> None:
    """Dispatch returns at once: ``executed`` with ``pending``, then ``ready`` when the
    device is done. Without ``ready`` in a process that never exited, it was running."""
    records = [
        start(5),
        {"e": "execute", "t": 2.0, "n": 1, "module": "jit_warmup"},
        {"e": "executed", "t": 2.1, "n": 1, "pending": True},
        {"e": "ready", "t": 2.5, "n": 1},
        {"e": "execute", "t": 3.0, "n": 2, "module": "jit_solve"},
        {"e": "executed", "t": 3.1, "n": 2, "pending": True},
        {"e": "execute", "t": 3.2, "n": 3, "module": "jit_log"},
        {"e": "executed", "t": 3.3, "n": 3},
    ]
    write(tmp_path, 5, *records)
    (p,) = evidence_files.load(tmp_path)
    assert [(e.module, e.finished, e.on_device) for e in p.events] == [
        ("jit_warmup", True, False),
        ("jit_solve", False, True),
        ("jit_log", True, False),
    ]
    assert p.unfinished is not None and p.unfinished.module == "jit_solve"
    # A normal exit leaves the watcher's last records unwritten: nothing is read from them.
    write(tmp_path, 5, *records, {"e": "exit", "t": 4.0, "status": 0})
    (p,) = evidence_files.load(tmp_path)
    assert p.unfinished is None


def test_an_exec_is_the_same_process_next_image(tmp_path: Path) -> None:
    """os.execv keeps the pid: the records of the new image append to the same file, and
    what it did is what the process did; the first image's calls are not mixed in."""
    write(
        tmp_path,
        5,
        start(5, t=1.0),
        {"e": "compile", "t": 1.5, "n": 1, "module": "jit_probe"},
        {"e": "compiled", "t": 1.6, "n": 1},
        start(5, t=2.0, argv=["x.py", "--child"]),
        {"e": "compile", "t": 2.5, "n": 1, "module": "jit_augment"},
    )
    (p,) = evidence_files.load(tmp_path)
    assert p.argv == ("x.py", "--child")
    assert [(e.module, e.finished) for e in p.events] == [("jit_augment", False)]


def test_the_status_sys_exit_was_asked_for_stands_until_xla_is_called_again(
    tmp_path: Path,
) -> None:
    """``exiting`` is written as the program calls sys.exit, before an exit that may never
    finish; a program that caught its SystemExit and called XLA again had not ended."""
    backend = {"e": "backend", "t": 2, "platform": "cpu"}
    write(tmp_path, 10, start(10), backend, {"e": "exiting", "t": 3, "status": 1})
    write(tmp_path, 11, start(11, t=1.1), backend, {"e": "exiting", "t": 3, "status": 2},
          {"e": "execute", "t": 4, "n": 1, "module": "jit_f"})  # fmt: skip
    write(tmp_path, 12, start(12, t=1.2), backend, {"e": "exiting", "t": 3, "status": 1},
          {"e": "exit", "t": 3.5, "status": 1, "how": "sys.exit"})  # fmt: skip
    aborted, went_on, exited = evidence_files.load(tmp_path)
    assert (aborted.asked_exit, aborted.exited) == (1, False)
    assert went_on.asked_exit is None
    assert (exited.asked_exit, exited.exited, exited.exit_status) == (1, True, 1)
