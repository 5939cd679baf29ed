"""Extraction driven by a trusted list of files (``Expected``), on real hostile archives.

What each test checks is what extraction let through, never how long it took: bytes that
reached a sink (``Tally``), what is left in the destination, what a tar.gz decompressed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.hostile import (
    DEEP,
    SUFFIX,
    Tally,
    patch_zip_size,
    tar_with_zeros_after,
    tree,
    write_raw,
)
from xla_bugkit import archive
from xla_bugkit.archive import Expected, check_archive, extract_safely
from xla_bugkit.archive.formats import MAX_TAR_TAIL
from xla_bugkit.archive.members import CHUNK, MAX_DEPTH
from xla_bugkit.errors import BadBundleError

FORMATS = archive.FORMATS
BIG = 32 << 20  # zeros: 32 MiB a member really holds, tens of KiB in the archive


def _expect(data: bytes, slack: int = 0) -> Expected:
    return Expected(len(data), hashlib.sha256(data).hexdigest(), slack)


@pytest.fixture
def dest(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "dest").mkdir()
    yield tmp_path / "dest"


@pytest.fixture
def tally(monkeypatch: pytest.MonkeyPatch) -> Tally:
    return Tally(monkeypatch)


def _archive(tmp_path: Path, fmt: str, members: list[tuple[str, bytes]]) -> Path:
    return write_raw(fmt, tmp_path / f"b{SUFFIX[fmt]}", members)


@pytest.mark.parametrize("fmt", FORMATS)
def test_listed_files_extract_and_edits_within_their_slack_pass(
    fmt: str, tmp_path: Path, dest: Path
) -> None:
    path = _archive(tmp_path, fmt, [("a/data.pb", b"\x0a\x05jit_f"), ("notes.md", b"mine\n")])
    expected = {"a/data.pb": _expect(b"\x0a\x05jit_f"), "notes.md": _expect(b"# x\n", 100)}
    written = extract_safely(path, dest, expected=expected)
    assert written == [dest.resolve() / "a/data.pb", dest.resolve() / "notes.md"]
    assert (dest / "notes.md").read_bytes() == b"mine\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_member_bigger_than_listed_is_refused_before_a_byte_of_it(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally
) -> None:
    path = _archive(tmp_path, fmt, [("small", b"ok"), ("big", bytes(BIG))])
    expected = {"small": _expect(b"ok"), "big": _expect(b"0123456789")}
    with pytest.raises(BadBundleError, match=r"^big does not match its sha256 in the manifest$"):
        extract_safely(path, dest, expected=expected)
    assert tally.total == 0, "refused from the listing, before anything was extracted"
    assert tree(dest) == set()
    if fmt == "tar.gz":  # refused at big's header: its data was never decompressed
        assert tally.decompressed < 1 << 20


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_editable_member_may_not_grow_past_its_slack(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally
) -> None:
    path = _archive(tmp_path, fmt, [("ISSUE.md", b"x" * 300)])
    with pytest.raises(BadBundleError, match="where its manifest lists 4 and 100 more for edits"):
        extract_safely(path, dest, expected={"ISSUE.md": _expect(b"# x\n", 100)})
    assert tally.total == 0 and tree(dest) == set()


def test_a_zip_whose_header_lies_stops_at_the_listed_size(
    tmp_path: Path, dest: Path, tally: Tally
) -> None:
    """Headers and manifest agree on 10 bytes; the data inflates to 32 MiB."""
    path = _archive(tmp_path, "zip", [("big", bytes(BIG))])
    patch_zip_size(path, "big", 10)
    with pytest.raises(BadBundleError, match=r"CRC mismatch in big\)$"):
        extract_safely(path, dest, expected={"big": _expect(bytes(10))})
    assert tally.total <= 10
    assert tree(dest) == set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sha256_mismatch_stops_extraction_at_that_member(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally
) -> None:
    first, second = bytes(1 << 20), b"y" * (1 << 20)
    path = _archive(tmp_path, fmt, [("first", first), ("second", second)])
    expected = {"first": _expect(first[:-1] + b"!"), "second": _expect(second)}
    with pytest.raises(BadBundleError, match=r"^first does not match its sha256 in the manifest$"):
        extract_safely(path, dest, expected=expected)
    assert "second" not in tally.sunk
    assert tree(dest) == set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_unlisted_member_is_refused_before_anything_is_written(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally
) -> None:
    path = _archive(tmp_path, fmt, [("listed", b"ok"), ("extra.txt", b"surprise")])
    with pytest.raises(BadBundleError, match="holds files its manifest does not list: 'extra"):
        extract_safely(path, dest, expected={"listed": _expect(b"ok")})
    assert tally.total == 0 and tree(dest) == set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_listed_member_missing_is_refused(fmt: str, tmp_path: Path, dest: Path) -> None:
    path = _archive(tmp_path, fmt, [("listed", b"ok")])
    expected = {"listed": _expect(b"ok"), "gone.pb": _expect(b"pb")}
    with pytest.raises(BadBundleError, match=r"lacks files its manifest lists: \['gone\.pb'\]"):
        extract_safely(path, dest, expected=expected)
    assert tree(dest) == set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_duplicate_of_a_listed_member_is_refused(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally
) -> None:
    path = _archive(tmp_path, fmt, [("m", b"ok"), ("m", b"ok")])
    with pytest.raises(BadBundleError, match="refusing duplicate entry 'm'"):
        extract_safely(path, dest, expected={"m": _expect(b"ok")})
    assert tally.total == 0 and tree(dest) == set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_path_30000_folders_deep_is_refused_before_any_folder_is_made(
    fmt: str, tmp_path: Path, dest: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []
    mkdir = Path.mkdir

    def spied_mkdir(p: Path, *args: object, **kwargs: object) -> None:
        made.append(p)
        mkdir(p, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", spied_mkdir)
    path = _archive(tmp_path, fmt, [("ok/f", b"fine"), (DEEP, b"x")])
    with pytest.raises(BadBundleError, match=r"refusing entry 'a/a/a.*\(60001 characters\)"):
        extract_safely(path, dest)
    assert not [p for p in made if dest in p.parents], "no folder made for any entry"
    assert tally.total == 0 and tree(dest) == set()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/".join(["d"] * MAX_DEPTH) + "/f", f"more than {MAX_DEPTH} levels deep"),
        ("d/" + "n" * 256, "a path component longer than 255 bytes"),
        ("d/" + "é" * 128, "a path component longer than 255 bytes"),  # 256 bytes in UTF-8
    ],
)
def test_deep_and_long_names_are_refused(name: str, reason: str, tmp_path: Path) -> None:
    path = _archive(tmp_path, "zip", [(name, b"x")])
    with pytest.raises(BadBundleError, match=reason):
        check_archive(path)
    ok = _archive(tmp_path, "tar.gz", [("/".join(["d"] * (MAX_DEPTH - 1)) + "/f", b"x")])
    check_archive(ok)


def test_zeros_after_a_tar_end_are_capped_not_read_to_their_end(
    tmp_path: Path, dest: Path, tally: Tally
) -> None:
    path = tar_with_zeros_after(tmp_path / "b.tar.gz", [("f", b"data")], zeros=64 << 20)
    with pytest.raises(BadBundleError, match=f"over {MAX_TAR_TAIL} bytes of zeros after its"):
        extract_safely(path, dest, expected={"f": _expect(b"data")})
    assert tally.decompressed < MAX_TAR_TAIL + 2 * CHUNK + 4096
    assert tree(dest) == set()


def test_a_tar_padded_to_its_record_passes(tmp_path: Path, dest: Path) -> None:
    path = tar_with_zeros_after(tmp_path / "b.tar.gz", [("f", b"data")], zeros=0)
    extract_safely(path, dest, expected={"f": _expect(b"data")})
    assert (dest / "f").read_bytes() == b"data"


@pytest.mark.parametrize("fmt", FORMATS)
def test_check_archive_checks_everything_and_writes_nothing(
    fmt: str, tmp_path: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _archive(tmp_path, fmt, [("a", b"alpha"), ("b", b"beta")])
    before = tree(tmp_path)
    check_archive(path, expected={"a": _expect(b"alpha"), "b": _expect(b"beta")})
    assert tally.sunk == {"a": 5, "b": 4}, "every byte hashed"
    with pytest.raises(BadBundleError, match=r"^b does not match its sha256"):
        check_archive(path, expected={"a": _expect(b"alpha"), "b": _expect(b"BETA")})
    assert tree(tmp_path) == before
