"""search_symbol: the same answer as reading every text dump whole, in threads and chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.capture import dumps, search
from xla_bugkit.capture.dumps import DumpIndex
from xla_bugkit.capture.search import search_symbol


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


def test_one_thread_gives_the_same_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "_cores", lambda: 1)
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
