"""Tests for xla_bugkit.filememo and what it serves: a value worked out ahead is found for a
file only while the file is as it was (through a hard link too), and the hashes and packing
decisions found so are those worked out anew."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from xla_bugkit import filememo
from xla_bugkit.archive import packing
from xla_bugkit.bundle.manifest.write import hash_ahead, sha256_of


def test_a_value_is_found_through_a_link_and_lost_once_the_file_changes(tmp_path: Path) -> None:
    memo: filememo.Memo[str] = filememo.Memo()
    path, link = tmp_path / "a.pb", tmp_path / "b.pb"
    path.write_bytes(b"weights")
    memo.put(path, "seen", tag=1)
    os.link(path, link)
    assert memo.get(link, tag=1) == "seen"
    assert memo.get(link, tag=2) is None  # what else it depends on is part of the key
    with path.open("ab") as f:  # written in place
        f.write(b" and more")
    assert memo.get(path, tag=1) is None and memo.get(link, tag=1) is None
    memo.put(path, "seen again", tag=1)
    (tmp_path / "new").write_bytes(b"weights and more")
    os.replace(tmp_path / "new", path)  # replaced by another file of the same bytes
    assert memo.get(path, tag=1) is None
    assert memo.get(tmp_path / "missing") is None


def test_only_the_newest_values_are_kept(tmp_path: Path) -> None:
    memo: filememo.Memo[int] = filememo.Memo()
    paths = [tmp_path / f"{i}" for i in range(filememo._KEPT + 1)]
    for i, path in enumerate(paths):
        path.write_bytes(b"x")
        memo.put(path, i)
    assert memo.get(paths[0]) is None and memo.get(paths[-1]) == len(paths) - 1


def test_a_hash_worked_out_ahead_is_the_files_own(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.pb"
    path.write_bytes(random.Random(3).randbytes(3 << 20))
    fresh = sha256_of(path)
    hash_ahead(path)
    os.link(path, tmp_path / "staged.pb")
    assert sha256_of(tmp_path / "staged.pb") == fresh
    path.write_bytes(b"other bytes")  # the staged link changes with it
    assert sha256_of(tmp_path / "staged.pb") == sha256_of(path) != fresh


def test_packing_weighed_ahead_decides_as_packing_weighed_now(tmp_path: Path) -> None:
    rng = random.Random(5)
    noise, twice = tmp_path / "noise.pb", tmp_path / "twice.pb"
    noise.write_bytes(rng.randbytes(2 << 20))
    half = rng.randbytes(1 << 20)
    twice.write_bytes(half + half)  # repeats itself: LZMA's
    text = tmp_path / "module.txt"
    text.write_bytes(noise.read_bytes()[: 1 << 16])  # a stream companion that shares bytes
    cases = [(noise, ()), (twice, ()), (noise, (text,))]
    fresh = [packing.how_to_pack(p, others, store=True) for p, others in cases]
    assert fresh == [packing.STORE, None, None]
    for path in (noise, twice):
        packing.weigh_ahead(path)
    assert [packing.how_to_pack(p, others, store=True) for p, others in cases] == fresh


def test_what_was_weighed_ahead_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "snapshot.pb"
    path.write_bytes(random.Random(9).randbytes(2 << 20))
    packing.weigh_ahead(path)
    hash_ahead(path)
    os.link(path, tmp_path / "staged.pb")

    def unread(*args: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(packing, "_samples", unread)
    monkeypatch.setattr(packing, "_window_hashes", unread)
    monkeypatch.setattr(hashlib, "sha256", unread)
    assert packing.how_to_pack(tmp_path / "staged.pb", store=True) == packing.STORE
    assert len(sha256_of(tmp_path / "staged.pb")) == 64
