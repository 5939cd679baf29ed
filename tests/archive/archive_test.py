"""Tests for xla_bugkit.archive on real archives, including hostile ones built here."""

from __future__ import annotations

import gzip
import io
import os
import random
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import py7zr
import pytest

from tests.helpers.hostile import SUFFIX, write_raw
from xla_bugkit import archive
from xla_bugkit.archive import Entry, extract_safely, list_entries, read_member, write_archive
from xla_bugkit.archive.folder import DirReader
from xla_bugkit.errors import BadBundleError, BugkitError

FORMATS = archive.FORMATS
SEVENZ_UNIX_EXTENSION = 0x8000  # 7z attribute flag: a unix st_mode sits in the high 16 bits


# --- helpers ---------------------------------------------------------------------------


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """An archive directory, a fresh dest inside its own parent, and an empty cwd."""
    dirs = {name: tmp_path / name for name in ("src", "arc", "out", "cwd")}
    for d in dirs.values():
        d.mkdir()
    dirs["dest"] = dirs["out"] / "dest"
    dirs["dest"].mkdir()
    monkeypatch.chdir(dirs["cwd"])
    yield dirs


def _assert_refused_cleanly(layout: dict[str, Path], archive_path: Path) -> None:
    assert _tree(layout["out"]) == {"dest"}, "dest must be left empty, its parent untouched"
    assert _tree(layout["cwd"]) == set()
    assert _tree(layout["arc"]) == {archive_path.name}
    assert not Path("/abs/evil").exists()
    assert not (layout["out"].parent / "evil").exists()


def _tar_with(path: Path, info: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w:gz") as tf:
        tf.addfile(info, io.BytesIO(data) if data else None)
    return path


def _tar_info(name: str, kind: bytes, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def _zip_with_mode(path: Path, name: str, mode: int, data: bytes) -> Path:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix: the high 16 bits of external_attr are st_mode
    info.external_attr = mode << 16
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(info, data)
    return path


def _sources(src: Path) -> dict[str, Path]:
    rng = random.Random(7)
    big = src / "big.bin"
    text = b"".join(b"line %d of an HLO-ish dump\n" % i for i in range(100_000))
    big.write_bytes(rng.randbytes(5 << 20) + text)  # ~5 MB random, then compressible text
    (src / "manifest.json").write_text('{"schema": 1}\n')
    (src / "empty").write_bytes(b"")
    return {"big.bin": big, "manifest.json": src / "manifest.json", "hlo/empty": src / "empty"}


# --- writing and reading back ----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(fmt: str, layout: dict[str, Path]) -> None:
    files = _sources(layout["src"])
    out = layout["arc"] / f"bundle{SUFFIX[fmt]}"
    calls: list[tuple[int, int]] = []

    size = write_archive(files, out, progress=lambda done, total: calls.append((done, total)))

    assert size == out.stat().st_size
    total = sum(p.stat().st_size for p in files.values())
    assert calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert _tree(layout["arc"]) == {out.name}, "no temp file left behind"
    assert list_entries(out) == [
        Entry(name, files[name].stat().st_size, True) for name in sorted(files)
    ]
    assert read_member(out, "manifest.json", limit=1024) == b'{"schema": 1}\n'
    written = extract_safely(out, layout["dest"])
    assert written == [layout["dest"].resolve() / name for name in sorted(files)]
    for name, src in files.items():
        assert (layout["dest"] / name).read_bytes() == src.read_bytes()


def test_7z_is_smaller_than_zip(layout: dict[str, Path]) -> None:
    text = layout["src"] / "dump.txt"
    text.write_bytes(
        b"".join(b"%%fusion.%d = f32[128] add(%%p0, %%p1)\n" % i for i in range(50_000))
    )
    sizes = {
        fmt: write_archive({"dump.txt": text}, layout["arc"] / f"b{SUFFIX[fmt]}") for fmt in FORMATS
    }
    assert sizes["7z"] < sizes["zip"]
    assert sizes["7z"] < sizes["tar.gz"]


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_zip_and_tar_bytes_are_deterministic(fmt: str, layout: dict[str, Path]) -> None:
    (layout["src"] / "a").write_bytes(b"alpha" * 1000)
    (layout["src"] / "b").write_bytes(b"beta")
    files = {"z/b": layout["src"] / "b", "a": layout["src"] / "a"}
    first = layout["arc"] / f"one{SUFFIX[fmt]}"
    second = layout["arc"] / f"two{SUFFIX[fmt]}"
    write_archive(files, first)
    os.utime(layout["src"] / "a", (1_000_000_000, 1_000_000_000))  # mtimes must not leak in
    write_archive(dict(reversed(files.items())), second)
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
def test_interrupted_write_leaves_old_archive(fmt: str, layout: dict[str, Path]) -> None:
    files = _sources(layout["src"])
    out = layout["arc"] / f"bundle{SUFFIX[fmt]}"
    out.write_bytes(b"the previous bundle")

    def interrupt(done: int, total: int) -> None:
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_archive(files, out, progress=interrupt)
    assert out.read_bytes() == b"the previous bundle"
    assert _tree(layout["arc"]) == {out.name}


@pytest.mark.parametrize("fmt", FORMATS)
def test_source_vanishing_mid_write_leaves_old_archive(fmt: str, layout: dict[str, Path]) -> None:
    first, second = layout["src"] / "a.bin", layout["src"] / "b.bin"
    first.write_bytes(os.urandom(1 << 20))
    second.write_bytes(b"soon gone")
    out = layout["arc"] / f"bundle{SUFFIX[fmt]}"
    out.write_bytes(b"the previous bundle")

    def remove_second(done: int, total: int) -> None:
        if done > 0:
            second.unlink(missing_ok=True)

    with pytest.raises(BugkitError, match=r"cannot read .*b\.bin"):
        write_archive({"a.bin": first, "b.bin": second}, out, progress=remove_second)
    assert out.read_bytes() == b"the previous bundle"
    assert _tree(layout["arc"]) == {out.name}


def test_write_refuses_bad_names_and_formats(layout: dict[str, Path]) -> None:
    src = layout["src"] / "f"
    src.write_bytes(b"x")
    with pytest.raises(BugkitError, match=r"'\.\.' component"):
        write_archive({"../f": src}, layout["arc"] / "b.zip")
    with pytest.raises(BugkitError, match="cannot tell the archive format"):
        write_archive({"f": src}, layout["arc"] / "b.rar")
    with pytest.raises(BugkitError, match="unknown archive format 'rar'"):
        write_archive({"f": src}, layout["arc"] / "b.zip", fmt="rar")
    with pytest.raises(BugkitError, match="not a regular file"):
        write_archive({"f": layout["src"]}, layout["arc"] / "b.zip")
    os.mkfifo(layout["src"] / "fifo")
    with pytest.raises(BugkitError, match="not a regular file"):
        write_archive({"f": layout["src"] / "fifo"}, layout["arc"] / "b.zip")
    assert _tree(layout["arc"]) == set()


def test_format_of(layout: dict[str, Path]) -> None:
    src = layout["src"] / "f"
    src.write_bytes(b"x")
    assert archive.format_of(Path("x.TGZ")) == "tar.gz"
    for fmt in FORMATS:
        made = layout["arc"] / f"b{SUFFIX[fmt]}"
        write_archive({"f": src}, made)
        assert archive.format_of(made) == fmt
        renamed = made.rename(layout["arc"] / f"{fmt}.bundle")
        assert archive.format_of(renamed) == fmt
        assert list_entries(renamed) == [Entry("f", 1, True)]
    text = layout["arc"] / "notes.bundle"
    text.write_text("hello")
    with pytest.raises(BadBundleError, match=r"notes\.bundle is not a 7z, zip or tar\.gz archive"):
        archive.format_of(text)


# --- listing and reading without extracting --------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_list_and_read_write_nothing(fmt: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("manifest.json", b"{}")])
    before = _tree(layout["arc"].parent)
    assert list_entries(path) == [Entry("manifest.json", 2, True)]
    assert read_member(path, "manifest.json", limit=2) == b"{}"
    with pytest.raises(BadBundleError, match=r"manifest\.json is 2 bytes, over the 1 allowed"):
        read_member(path, "manifest.json", limit=1)
    with pytest.raises(BadBundleError, match=r"has no report\.md"):
        read_member(path, "report.md", limit=100)
    assert _tree(layout["arc"].parent) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_list_shows_hostile_entries_without_writing(fmt: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("../evil", b"x")])
    assert list_entries(path) == [Entry("../evil", 1, True)]
    with pytest.raises(BadBundleError, match="more than once"):
        read_member(
            write_raw(fmt, layout["arc"] / f"d{SUFFIX[fmt]}", [("m", b"1"), ("m", b"2")]),
            "m",
            limit=10,
        )
    assert _tree(layout["cwd"]) == set()


def test_extract_needs_an_empty_dest(layout: dict[str, Path]) -> None:
    path = write_raw("zip", layout["arc"] / "b.zip", [("f", b"x")])
    (layout["dest"] / "already").write_bytes(b"")
    with pytest.raises(BugkitError, match="must be an existing, empty directory"):
        extract_safely(path, layout["dest"])


def test_extract_keeps_directories(layout: dict[str, Path]) -> None:
    path = layout["arc"] / "b.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        tf.addfile(_tar_info(".", tarfile.DIRTYPE))
        tf.addfile(_tar_info("./d", tarfile.DIRTYPE))
        tf.addfile(_tar_info("./d/e", tarfile.DIRTYPE))
        info = tarfile.TarInfo("./d/f")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"hi"))
    assert extract_safely(path, layout["dest"]) == [layout["dest"].resolve() / "d/f"]
    assert _tree(layout["dest"]) == {"d", "d/e", "d/f"}


# --- hostile archives --------------------------------------------------------------------

HOSTILE_NAMES = [
    ("../evil", "'..' component"),
    ("/abs/evil", "absolute path"),
    ("a/../../evil", "'..' component"),
    ("C:/evil", "drive letter"),
    # py7zr turns a stored backslash into "/" when it reads, so 7z sees "../evil".
    ("..\\evil", "backslash|'..' component"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("name", "reason"), HOSTILE_NAMES)
def test_refuses_hostile_names(fmt: str, name: str, reason: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("ok", b"fine"), (name, b"evil")])
    with pytest.raises(BadBundleError, match=f"refusing entry '.*evil': ({reason})"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_duplicates(fmt: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("m", b"first"), ("m", b"two")])
    with pytest.raises(BadBundleError, match="refusing duplicate entry 'm'"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_file_under_a_file(fmt: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("a", b"1"), ("a/b", b"2")])
    with pytest.raises(BadBundleError, match="'a': both a file and a directory"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


def _symlink_archive(fmt: str, layout: dict[str, Path]) -> Path:
    path = layout["arc"] / f"b{SUFFIX[fmt]}"
    if fmt == "zip":
        return _zip_with_mode(path, "link", stat.S_IFLNK | 0o777, b"/etc/passwd")
    if fmt == "tar.gz":
        return _tar_with(path, _tar_info("link", tarfile.SYMTYPE, linkname="/etc/passwd"))
    link = layout["src"] / "link"
    link.symlink_to("/etc/passwd")
    with py7zr.SevenZipFile(path, "w") as sz:
        sz.write(link, "link")  # py7zr stores a symlink it is given as a symlink
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_symlinks(fmt: str, layout: dict[str, Path]) -> None:
    path = _symlink_archive(fmt, layout)
    assert list_entries(path)[0].is_file is False
    with pytest.raises(BadBundleError, match="refusing symlink entry 'link'"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


TAR_SPECIALS: list[tuple[bytes, dict[str, object], str]] = [
    (tarfile.LNKTYPE, {"linkname": "/etc/passwd"}, "hard link"),
    (tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3}, "special file"),
    (tarfile.BLKTYPE, {"devmajor": 8, "devminor": 0}, "special file"),
    (tarfile.FIFOTYPE, {}, "special file"),
]


@pytest.mark.parametrize(("kind", "attrs", "what"), TAR_SPECIALS)
def test_refuses_tar_links_and_devices(
    kind: bytes, attrs: dict[str, object], what: str, layout: dict[str, Path]
) -> None:
    path = _tar_with(layout["arc"] / "b.tar.gz", _tar_info("node", kind, **attrs))
    with pytest.raises(BadBundleError, match=f"refusing {what} entry 'node'"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


def test_refuses_zip_fifo(layout: dict[str, Path]) -> None:
    path = _zip_with_mode(layout["arc"] / "b.zip", "node", stat.S_IFIFO | 0o644, b"")
    with pytest.raises(BadBundleError, match="refusing special file entry 'node'"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("kind", [stat.S_IFIFO, stat.S_IFCHR, stat.S_IFSOCK])
def test_refuses_7z_special_files(kind: int, layout: dict[str, Path]) -> None:
    path = layout["arc"] / "b.7z"
    with py7zr.SevenZipFile(path, "w") as sz:
        sz.writestr(b"", "node")
        # py7zr cannot add a device or FIFO from disk; set the unix mode it would store.
        unix_mode = SEVENZ_UNIX_EXTENSION | ((kind | 0o644) << 16)
        sz.header.files_info.files[-1]["attributes"] = unix_mode
    assert list_entries(path) == [Entry("node", 0, False)]
    with pytest.raises(BadBundleError, match="refusing special file entry 'node'"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_a_bomb_by_total(fmt: str, layout: dict[str, Path]) -> None:
    members = [("small", b"ok"), ("zeros", bytes(4 << 20))]
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", members)
    with pytest.raises(BadBundleError, match=r"over the limit of 1048576 bytes.*bomb"):
        extract_safely(path, layout["dest"], max_total=1 << 20)
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_a_bomb_by_ratio(fmt: str, layout: dict[str, Path]) -> None:
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", [("zeros", bytes(4 << 20))])
    with pytest.raises(BadBundleError, match="over the limit of 50x its size"):
        extract_safely(path, layout["dest"], max_ratio=50)
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_too_many_entries(fmt: str, layout: dict[str, Path]) -> None:
    members = [(f"f{i}", b"x") for i in range(12)]
    path = write_raw(fmt, layout["arc"] / f"b{SUFFIX[fmt]}", members)
    with pytest.raises(BadBundleError, match="more than 10 entries"):
        extract_safely(path, layout["dest"], max_entries=10)
    _assert_refused_cleanly(layout, path)


def _patch_u32(data: bytearray, signature: bytes, field_offset: int, value: int) -> None:
    at = data.index(signature)
    data[at + field_offset : at + field_offset + 4] = value.to_bytes(4, "little")


def test_refuses_zip_whose_sizes_lie(layout: dict[str, Path]) -> None:
    path = write_raw("zip", layout["arc"] / "b.zip", [("zeros", bytes(4 << 20))])
    data = bytearray(path.read_bytes())
    _patch_u32(data, b"PK\x03\x04", 22, 10)  # local header: uncompressed size
    _patch_u32(data, b"PK\x01\x02", 24, 10)  # central directory: uncompressed size
    path.write_bytes(bytes(data))
    assert list_entries(path) == [Entry("zeros", 10, True)]
    with pytest.raises(BadBundleError, match=r"b\.zip is truncated or corrupt \(CRC mismatch"):
        extract_safely(path, layout["dest"], max_total=1 << 20)
    _assert_refused_cleanly(layout, path)


def test_refuses_tar_whose_header_claims_more_than_it_holds(layout: dict[str, Path]) -> None:
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as tf:
        info = tarfile.TarInfo("f")
        info.size = 100
        tf.addfile(info, io.BytesIO(b"x" * 100))
    raw = inner.getvalue()[: 512 + 50]  # the header says 100 bytes; only 50 follow
    path = layout["arc"] / "b.tar.gz"
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(BadBundleError, match=r"b\.tar\.gz is truncated or corrupt"):
        extract_safely(path, layout["dest"])
    _assert_refused_cleanly(layout, path)


# --- broken archives ----------------------------------------------------------------------

Breaker = Callable[[bytes], bytes]


def _flip_middle(data: bytes) -> bytes:
    middle = bytearray(data)
    for i in range(len(data) // 2, len(data) // 2 + 8):
        middle[i] ^= 0xFF
    return bytes(middle)


BREAKERS: list[tuple[str, Breaker, str]] = [
    ("truncated", lambda d: d[: len(d) // 2], "is truncated or corrupt"),
    ("flipped", _flip_middle, "is truncated or corrupt"),
    ("empty", lambda d: b"", "is empty, not an archive"),
    ("text", lambda d: b"just some notes\n", "is not a .* archive \\(wrong signature\\)"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("how", "breaker", "message"), BREAKERS)
def test_broken_archives_fail_in_one_line(
    fmt: str, how: str, breaker: Breaker, message: str, layout: dict[str, Path]
) -> None:
    rng = random.Random(3)
    members = [("manifest.json", b"{}"), ("data.bin", rng.randbytes(200_000))]
    path = write_raw(fmt, layout["arc"] / f"bundle{SUFFIX[fmt]}", members)
    path.write_bytes(breaker(path.read_bytes()))
    calls: list[Callable[[], object]] = [lambda: extract_safely(path, layout["dest"])]
    if how != "flipped":  # a flip in member data only shows when that member is read
        calls += [lambda: list_entries(path), lambda: read_member(path, "data.bin", 1 << 20)]
    for call in calls:
        with pytest.raises(BadBundleError, match=f"bundle{SUFFIX[fmt]} {message}") as caught:
            call()
        assert "\n" not in str(caught.value)
    _assert_refused_cleanly(layout, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_truncation_and_flip_is_caught(fmt: str, layout: dict[str, Path]) -> None:
    rng = random.Random(5)
    members = [("a.bin", rng.randbytes(30_000)), ("b.txt", b"text\n" * 5000)]
    good = write_raw(fmt, layout["src"] / f"good{SUFFIX[fmt]}", members).read_bytes()
    path = layout["arc"] / f"b{SUFFIX[fmt]}"
    cuts = [good[:n] for n in rng.sample(range(1, len(good)), 25)]
    flips = [_flip_at(good, i) for i in rng.sample(range(len(good)), 40)]
    for variant in cuts + flips:
        path.write_bytes(variant)
        try:
            extract_safely(path, layout["dest"])
        except BadBundleError:
            assert _tree(layout["dest"]) == set()
            continue
        # A flip the format does not protect (e.g. a timestamp) may pass; the data may not.
        for name, data in members:
            assert (layout["dest"] / name).read_bytes() == data
        for child in layout["dest"].iterdir():
            child.unlink()


def _flip_at(data: bytes, i: int) -> bytes:
    flipped = bytearray(data)
    flipped[i] ^= 0x01
    return bytes(flipped)


def test_a_bundle_unpacked_by_hand_reads_as_its_archive_did(tmp_path: Path) -> None:
    files = {"manifest.json": b"{}", "modules/m/m.txt": b"HloModule m\n", "big.pb": os.urandom(9)}
    packed = tmp_path / "b.zip"
    write_archive({n: _written_file(tmp_path / "src" / n, b) for n, b in files.items()}, packed)
    folder = tmp_path / "unpacked"
    folder.mkdir()
    extract_safely(packed, folder)
    assert sorted(e.name for e in list_entries(folder)) == sorted(files)
    assert read_member(folder, "modules/m/m.txt", 100) == files["modules/m/m.txt"]
    again = tmp_path / "again"
    again.mkdir()
    extract_safely(folder, again)
    assert {p.relative_to(again).as_posix(): p.read_bytes() for p in _files_under(again)} == files
    # What the folder holds besides files is refused, never followed.
    (folder / "modules" / "escape").symlink_to("/etc", target_is_directory=True)
    (tmp_path / "third").mkdir()
    with pytest.raises(BadBundleError, match="symlink"):
        extract_safely(folder, tmp_path / "third")
    (folder / "modules" / "escape").unlink()
    os.mkfifo(folder / "pipe")
    (tmp_path / "fourth").mkdir()
    with pytest.raises(BadBundleError):
        extract_safely(folder, tmp_path / "fourth")
    assert not any((tmp_path / "fourth").iterdir())


def test_a_folder_changed_between_its_listing_and_its_reading_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder on which a link takes a listed folder's place after the listing: the file
    under it is opened from the folder one component at a time, and the link refused."""
    folder = tmp_path / "unpacked"
    _written_file(folder / "modules" / "m" / "m.txt", b"HloModule m\n")
    _written_file(tmp_path / "elsewhere" / "m" / "m.txt", b"HloModule m\n")
    listed = DirReader.__init__

    def swapped_once_listed(reader: object, *args: object) -> None:
        listed(reader, *args)  # type: ignore[arg-type]
        (folder / "modules").rename(tmp_path / "old")
        (folder / "modules").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    monkeypatch.setattr(DirReader, "__init__", swapped_once_listed)
    (tmp_path / "dest").mkdir()
    with pytest.raises(BadBundleError, match=r"refusing 'modules/m/m\.txt': 'modules' is a link$"):
        extract_safely(folder, tmp_path / "dest")
    assert not any((tmp_path / "dest").iterdir())
    _written_file(folder / "ISSUE.md", b"# title\n")
    with pytest.raises(
        BadBundleError, match=r"refusing 'ISSUE\.md/x': 'ISSUE\.md' is not a folder$"
    ):
        read_member(folder, "ISSUE.md/x", 100)


def test_a_folder_is_no_archive_to_measure_by_its_ratio(tmp_path: Path) -> None:
    # 4 MiB of zeros: over 10,000 times a 4-byte "archive", were a folder measured as one.
    _written_file(tmp_path / "b" / "manifest.json", b"{}")
    _written_file(tmp_path / "b" / "zeros.pb", bytes(4 << 20))
    assert archive.read.archive_size(tmp_path / "b") is None
    assert {e.name for e in list_entries(tmp_path / "b")} == {"manifest.json", "zeros.pb"}
    with pytest.raises(BadBundleError, match="over the limit of 1000 bytes"):
        (tmp_path / "dest").mkdir()
        extract_safely(tmp_path / "b", tmp_path / "dest", max_total=1000)


def _written_file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]
