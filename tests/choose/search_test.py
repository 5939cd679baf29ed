"""search_symbol: the same answer as reading every text dump whole, in one process or in
forked workers, in chunks."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from xla_bugkit.choose import dumps, search
from xla_bugkit.choose.dumps import DumpIndex
from xla_bugkit.choose.search import search_symbol


def _tree(root: Path, n: int = 40) -> DumpIndex:
    for i in range(n):
        stem = root / f"module_{i:04d}.jit_f{i}"
        body = f"HloModule jit_f{i}, entry\n" + "ROOT add = f32[] add(a, b)\n" * (i * 50)
        Path(f"{stem}.before_optimizations.txt").write_text(body)
        after = body + ('custom_call_target="needle_kernel"\n' if i % 7 == 3 else "")
        Path(f"{stem}.cpu_after_optimizations.txt").write_text(after)
        # Not a text dump: never searched, even when it holds the text.
        Path(f"{stem}.before_optimizations.hlo.pb").write_bytes(b"needle_kernel jit_f")
    return dumps.index(root)


def _whole_files(index: DumpIndex, text: str) -> dict[str, str]:
    """The plain definition: read each text dump whole, first match per module wins."""
    found = {}
    for m in index.modules:
        for f in m.files:
            roles = (dumps.Role.BEFORE_TEXT, dumps.Role.AFTER_TEXT)
            if f.role in roles and f.size and text.encode() in (index.root / f.path).read_bytes():
                found[m.label] = f.path.name
                break
    return found


@pytest.mark.parametrize("text", ["needle_kernel", "HloModule jit_f17,", "absent text", "ROOT"])
def test_same_answer_as_reading_whole_files(tmp_path: Path, text: str) -> None:
    index = _tree(tmp_path)
    found = search_symbol(index, index.modules, text)
    assert found == _whole_files(index, text)
    assert list(found) == list(_whole_files(index, text))  # in module order


def test_a_needle_across_two_chunks_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "CHUNK", 16)
    index = _tree(tmp_path, n=12)
    for text in ("needle_kernel", "HloModule jit_f11,", "add(a, b)\nROOT"):
        assert search_symbol(index, index.modules, text) == _whole_files(index, text)


def test_without_memmem_the_answer_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "_memmem", None)
    monkeypatch.setattr(search, "CHUNK", 64)
    index = _tree(tmp_path, n=12)
    assert search_symbol(index, index.modules, "needle_kernel") == _whole_files(
        index, "needle_kernel"
    )


def test_one_core_gives_the_same_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "usable_cores", lambda: 1)
    index = _tree(tmp_path, n=12)
    assert search_symbol(index, index.modules, "needle_kernel") == _whole_files(
        index, "needle_kernel"
    )


def test_only_the_given_modules_are_searched(tmp_path: Path) -> None:
    index = _tree(tmp_path, n=12)
    some = [m for m in index.modules if m.id in (3, 4)]
    assert search_symbol(index, some, "needle_kernel") == {
        "module_0003.jit_f3": "module_0003.jit_f3.cpu_after_optimizations.txt"
    }


def test_empty_text_matches_every_module_with_text(tmp_path: Path) -> None:
    index = _tree(tmp_path, n=5)
    assert search_symbol(index, index.modules, "") == _whole_files(index, "")


def _forking(monkeypatch: pytest.MonkeyPatch, workers: int = 3) -> list[int]:
    """Make even a small tree searched by forked workers; the list fills with their pids."""
    monkeypatch.setattr(search, "_FORK_WORTH", 1)
    monkeypatch.setattr(search, "usable_cores", lambda: workers)
    # The test session's own threads (a fixture's pool, idle on its queue) are there from
    # the start; a thread the test itself starts must still stop the fork.
    alive = threading.active_count()
    monkeypatch.setattr(search, "_fork_is_safe", lambda: threading.active_count() == alive)
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return pids


@pytest.mark.parametrize("text", ["needle_kernel", "HloModule jit_f17,", "absent text", "ROOT", ""])
def test_forked_workers_give_the_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    index = _tree(tmp_path)
    pids = _forking(monkeypatch)
    found = search_symbol(index, index.modules, text)
    assert len(pids) == 2  # this process searches too
    assert found == _whole_files(index, text)
    assert list(found) == list(_whole_files(index, text))


def test_forked_workers_read_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "CHUNK", 16)
    index = _tree(tmp_path, n=12)
    pids = _forking(monkeypatch, workers=2)
    for text in ("needle_kernel", "HloModule jit_f11,", "add(a, b)\nROOT"):
        assert search_symbol(index, index.modules, text) == _whole_files(index, text)
    assert len(pids) == 3


def test_a_worker_that_fails_leaves_the_search_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _tree(tmp_path)
    pids = _forking(monkeypatch)
    parent, scan = os.getpid(), search._scan

    def dies_in_a_child(*args: Any) -> list[int]:
        if os.getpid() != parent:
            raise MemoryError("a worker fails")
        return scan(*args)

    monkeypatch.setattr(search, "_scan", dies_in_a_child)
    assert search_symbol(index, index.modules, "needle_kernel") == _whole_files(
        index, "needle_kernel"
    )
    assert pids  # it did fork, and every child is gone
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_no_fork_while_another_thread_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = _tree(tmp_path)
    pids = _forking(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        found = search_symbol(index, index.modules, "needle_kernel")
    finally:
        stop.set()
        other.join()
    assert pids == []  # a fork here could leave the child waiting on a lock forever
    assert found == _whole_files(index, "needle_kernel")
