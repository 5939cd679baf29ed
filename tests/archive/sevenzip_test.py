"""7z archives written as several LZMA2 streams at once read back whole, here and by 7-Zip."""

from __future__ import annotations

import itertools
import lzma
import os
import random
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import py7zr
import pytest

from xla_bugkit.archive import (
    extract_safely,
    list_entries,
    packing,
    read_member,
    sevenzip,
    write_archive,
)
from xla_bugkit.errors import BugkitError


def _files(root: Path, n: int = 24) -> dict[str, Path]:
    """Text like an HLO dump (compressible), binary noise, and an empty file."""
    rng = random.Random(7)
    files: dict[str, Path] = {}
    for i in range(n):
        kind = "txt" if i % 2 else "hlo.pb"  # two families of content, and the noise a third
        name = f"modules/m{i:02d}/module_{i:04d}.jit_f.{kind}"
        body = "".join(f"%add.{j} = f32[{rng.randrange(99)}] add(%p, %q)\n" for j in range(400 * i))
        files[name] = root / f"t{i}.txt"
        files[name].write_text(body)
    files["noise.bin"] = root / "noise.bin"
    files["noise.bin"].write_bytes(rng.randbytes(300_000))
    files["empty.txt"] = root / "empty.txt"
    files["empty.txt"].write_bytes(b"")
    return files


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several streams even for test-sized inputs and on a one-core machine."""
    monkeypatch.setattr(sevenzip, "PARALLEL_FROM", 1 << 10)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)


def test_several_streams_read_back_whole(tmp_path: Path, parallel: None) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = _files(src)
    out = tmp_path / "b.7z"
    write_archive(files, out, "7z")
    with py7zr.SevenZipFile(out) as z:
        # Up to one stream per "core", cut only between families.
        assert len(z.header.main_streams.unpackinfo.folders) in (2, 3)
    names = [e.name for e in list_entries(out)]
    assert names == [name for name, _ in packing.arrange(sorted(files.items()))[0]]
    assert sorted(names) == sorted(files)
    for name, path in files.items():
        assert read_member(out, name, 1 << 30) == path.read_bytes()
    dest = tmp_path / "out"
    dest.mkdir()
    extract_safely(out, dest)
    for name, path in files.items():
        assert (dest / name).read_bytes() == path.read_bytes()


@pytest.mark.skipif(
    not any(shutil.which(x) for x in ("7z", "7zz", "7za")), reason="7-Zip is not installed"
)
def test_7zip_tests_the_archive_clean(tmp_path: Path, parallel: None) -> None:
    src = tmp_path / "src"
    src.mkdir()
    out = tmp_path / "b.7z"
    write_archive(_files(src), out, "7z")
    exe = next(p for x in ("7z", "7zz", "7za") if (p := shutil.which(x)))
    done = subprocess.run([exe, "t", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Everything is Ok" in done.stdout


def test_a_small_bundle_stays_one_stream(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    out = tmp_path / "b.7z"
    write_archive(_files(src, n=3), out, "7z")
    with py7zr.SevenZipFile(out) as z:
        assert len(z.header.main_streams.unpackinfo.folders) == 1


def test_an_unreadable_member_leaves_no_archive(tmp_path: Path, parallel: None) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = _files(src)
    files["modules/m05/module_0005.jit_f.txt"].unlink()  # gone after it was listed
    out = tmp_path / "b.7z"
    with pytest.raises(BugkitError):
        write_archive(files, out, "7z")
    assert list(tmp_path.glob("*.7z*")) == []


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_groups_are_contiguous_and_cover_every_member(n: int) -> None:
    sizes = [5, 100, 3, 3, 50, 0, 70, 1]
    runs = packing.groups(sizes, n)
    assert [i for r in runs for i in r] == list(range(len(sizes)))
    assert 1 <= len(runs) <= n
    if n == 2:
        assert sum(sizes[i] for i in runs[0]) >= 100  # no run is far below its share


def test_a_cut_never_separates_texts_that_share_constants(tmp_path: Path, parallel: None) -> None:
    # One module's HLO before and after optimization repeat the same large constants, and
    # another module of the program embeds them too: in one stream the copies pack to almost
    # nothing; cut apart, each pays for them in full.
    rng = random.Random(3)
    constants = ", ".join(f"{rng.uniform(-1, 1):.6f}" for _ in range(60_000)).encode()
    m = "modules/module_0007.jit_eval/module_0007.jit_eval"
    bodies = {
        f"{m}.before_optimizations.txt": b"HloModule before\n" + constants,
        f"{m}.cpu_after_optimizations.txt": b"HloModule after\n" + constants,
        f"{m}.before_optimizations.hlo.pb": rng.randbytes(150_000),
        f"{m}.cpu_after_optimizations.hlo.pb": rng.randbytes(150_000),
        "modules/module_0009.jit_step/module_0009.jit_step.before_optimizations.txt": (
            b"HloModule step\n" + constants
        ),
        "ISSUE.md": b"# an issue\n" * 100,
    }
    files, out = _written(tmp_path, bodies)
    with py7zr.SevenZipFile(out) as z:
        folders = z.header.main_streams.unpackinfo.folders
        streams = z.header.main_streams.substreamsinfo.num_unpackstreams_folders
    assert len(folders) == 2  # the texts; the protos and the rest (the cut nearest 1/3 and 2/3)
    names = [e.name for e in list_entries(out)]
    starts = list(itertools.accumulate(streams, initial=0))
    by_stream = [set(names[a:b]) for a, b in itertools.pairwise(starts)]
    assert {n for n in names if n.endswith(".txt")} in by_stream
    once = len(lzma.compress(constants, preset=9))
    # The protos' 300 kB of noise, and the constants packed once (cut: 300 kB + 2-3x once).
    assert out.stat().st_size < 300_000 + 1.3 * once
    for name, path in files.items():
        assert read_member(out, name, 1 << 30) == path.read_bytes()


def test_groups_cut_only_where_the_family_changes() -> None:
    sizes = [10, 10, 10, 10, 10, 10]
    families = ["a", "a", "a", "a", "b", "b"]
    assert packing.groups(sizes, 2, families) == [range(4), range(4, 6)]
    assert packing.groups(sizes, 3, ["a"] * 6) == [range(6)]  # one family: one stream


def _written(
    tmp_path: Path, bodies: dict[str, bytes], fmt: str = "7z", room: int | None = None
) -> tuple[dict[str, Path], Path]:
    """``bodies`` written out as files, and the archive written of them."""
    files = {}
    for i, (name, body) in enumerate(bodies.items()):
        files[name] = tmp_path / f"f{i}"
        files[name].write_bytes(body)
    out = tmp_path / f"b.{fmt}"
    write_archive(files, out, fmt, room=room)
    return files, out


def _arranged(
    tmp_path: Path, bodies: dict[str, bytes]
) -> tuple[list[tuple[str, Path]], dict[str, packing.Family]]:
    """``bodies`` written out, in ``arrange``'s order, and each member's family."""
    sources = []
    for i, (name, body) in enumerate(bodies.items()):
        (tmp_path / f"f{i}").write_bytes(body)
        sources.append((name, tmp_path / f"f{i}"))
    ordered, families = packing.arrange(sources)
    return ordered, dict(zip((name for name, _ in ordered), families, strict=True))


def test_modules_that_share_a_large_constant_are_one_family(tmp_path: Path) -> None:
    shared = b"%constant.1 = f32[300] constant({" + b"0.25, " * 300 + b"})\n"
    own = b"%constant.2 = f32[300] constant({" + b"0.5, " * 300 + b"})\n"
    bodies = {
        "modules/a/a.before_optimizations.txt": b"HloModule a\n" + shared,
        "modules/a/a.hlo.pb": b"a",
        "modules/b/b.before_optimizations.txt": b"HloModule b\n" + own,
        "modules/c/c.cpu_after_optimizations.txt": b"HloModule c\n" + own + shared,
        "modules/d/d.before_optimizations.txt": b"HloModule d\n" + b"%x = f32[] add()\n",
        "modules/d/pjrt/module.mlir": b"module",
        "ISSUE.md": b"#",
    }
    ordered, family = _arranged(tmp_path, bodies)
    # a and c share one constant, b and c another: one group, named by its first module.
    texts = [family[n] for n in bodies if n.endswith(".txt")]
    assert texts[:3] == [(0, "modules/a")] * 3
    assert texts[3] == (0, "modules/d")  # shares nothing: a family of its own
    assert family["modules/a/a.hlo.pb"] == (1, "modules/a")
    assert family["modules/d/pjrt/module.mlir"] == (2, "modules/d")
    assert family["ISSUE.md"] == (2, "ISSUE.md")
    assert [n for n, _ in ordered][:3] == [
        "modules/a/a.before_optimizations.txt",
        "modules/b/b.before_optimizations.txt",
        "modules/c/c.cpu_after_optimizations.txt",
    ]


def test_modules_whose_snapshots_hold_the_same_weights_are_one_family(tmp_path: Path) -> None:
    rng = random.Random(5)
    weights = rng.randbytes(64_000)  # float32 weights: random-looking bytes
    bodies = {
        "modules/m1/m1.snapshot.1.pb": b"\x0a\x10adam" + weights + rng.randbytes(2_000),
        "modules/m2/m2.snapshot.2.pb": b"\x0a\x10ema" + rng.randbytes(3_000) + weights,
        "modules/m3/m3.snapshot.3.pb": rng.randbytes(66_000),  # its own inputs
        "modules/m4/m4.snapshot.4.pb": bytes(66_000),  # zeros share nothing worth a stream
        "modules/m5/m5.snapshot.5.pb": bytes(66_000),
    }
    _, family = _arranged(tmp_path, bodies)
    assert [family[n] for n in bodies] == [
        (1, "modules/m1"),
        (1, "modules/m1"),
        (1, "modules/m3"),
        (1, "modules/m4"),
        (1, "modules/m5"),
    ]


def _seven_zip_reads(out: Path) -> None:
    """7-Zip, where it is installed, tests the archive clean."""
    exe = next((p for x in ("7z", "7zz", "7za") if (p := shutil.which(x))), None)
    if exe:
        done = subprocess.run([exe, "t", str(out)], capture_output=True, text=True, check=False)
        assert "Everything is Ok" in done.stdout, done.stdout + done.stderr


def _folders(archive: Path) -> list[tuple[str, list[str]]]:
    """Each folder's coder ("LZMA2", "DEFLATE") and the members it holds, in order."""
    names = iter(e.name for e in list_entries(archive) if e.size)
    coders = {b"\x21": "LZMA2", b"\x04\x01\x08": "DEFLATE", b"\x00": "COPY"}
    with py7zr.SevenZipFile(archive) as z:
        folders = z.header.main_streams.unpackinfo.folders
        counts = z.header.main_streams.substreamsinfo.num_unpackstreams_folders
        return [
            (coders[f.coders[0]["method"]], [next(names) for _ in range(count)])
            for f, count in zip(folders, counts, strict=True)
        ]


def test_near_random_members_go_as_deflate_unless_their_content_recurs(
    tmp_path: Path, parallel: None
) -> None:
    rng = random.Random(11)
    shared = rng.randbytes(1_500_000)  # the target's arguments, in its snapshot and inputs.npz
    bodies = {
        "modules/a/a.before_optimizations.txt": "".join(
            f"%add.{j} = f32[{rng.randrange(99)}] add(%p, %q)\n" for j in range(40_000)
        ).encode(),
        "modules/a/a.snapshot.1.pb": b"\x0a\x10" + shared,
        "inputs.npz": b"\x93NUMPY" + shared,
        "modules/b/b.snapshot.2.pb": rng.randbytes(1_500_000),  # weights: near-random
        "modules/c/c.snapshot.3.pb": rng.randbytes(1_200_000),
        "modules/d/d.snapshot.4.pb": bytes(1_500_000),  # zeros: LZMA packs them to nothing
        "modules/e/e.snapshot.5.pb": (lambda r: r + r)(rng.randbytes(800_000)),  # twice over
    }
    files, out = _written(tmp_path, bodies)
    folders = _folders(out)
    deflated = sorted(name for coder, names in folders if coder == "DEFLATE" for name in names)
    assert deflated == ["modules/b/b.snapshot.2.pb", "modules/c/c.snapshot.3.pb"]
    assert all(coder == "LZMA2" for coder, names in folders if "inputs.npz" in names)
    # Deflate costs ~0.1% on random bytes; what recurs is packed once, as LZMA packs it.
    random_bytes = 1_500_000 + 1_500_000 + 1_200_000 + 800_000
    assert out.stat().st_size < 1.01 * random_bytes + 200_000
    for name, path in files.items():
        assert read_member(out, name, 1 << 30) == path.read_bytes()
    _seven_zip_reads(out)  # the Deflate folders too


def test_deflate_suffices_only_for_near_random_bytes_that_do_not_recur(tmp_path: Path) -> None:
    rng = random.Random(3)
    weights = np.random.default_rng(3).standard_normal(100_000) * 0.01
    cases = {
        "random": (rng.randbytes(400_000), True),
        # A model's float32 weights: LZMA packs them a few percent better, at 10x the time.
        "weights": (weights.astype(np.float32).tobytes(), True),
        "zeros": (bytes(400_000), False),
        "text": ("".join(f"%x.{j} = f32[8] add(%p, %q)\n" for j in range(20_000)).encode(), False),
        "twice": ((lambda r: r + r)(rng.randbytes(200_000)), False),
        "empty": (b"", False),
    }
    for name, (body, expected) in cases.items():
        (tmp_path / name).write_bytes(body)
        assert packing.deflate_suffices(tmp_path / name) is expected, name
    # Its content recurs in a file beside it in the stream: LZMA finds that, Deflate cannot.
    assert not packing.deflate_suffices(tmp_path / "random", [tmp_path / "random"])
    assert not packing.deflate_suffices(tmp_path / "gone")


def _weights_file(rng: random.Random, n: int) -> bytes:
    """A snapshot's shape: float32 weights, then a small array of ones at the end."""
    weights = np.random.default_rng(rng.randrange(99)).standard_normal(n) * 0.01
    return b"\x0a\x10" + weights.astype(np.float32).tobytes() + np.ones(16_384, "f4").tobytes()


def test_within_the_room_members_deflate_would_pack_little_are_stored(
    tmp_path: Path, parallel: None
) -> None:
    rng = random.Random(17)
    bodies = {
        "modules/a/a.before_optimizations.txt": "".join(
            f"%add.{j} = f32[{rng.randrange(99)}] add(%p, %q)\n" for j in range(40_000)
        ).encode(),
        "modules/a/a.snapshot.1.pb": _weights_file(rng, 400_000),
        "modules/b/b.snapshot.2.pb": rng.randbytes(1_200_000),
        "modules/d/d.snapshot.4.pb": bytes(1_500_000),  # zeros: LZMA packs them to nothing
        "modules/e/e.snapshot.5.pb": (lambda r: r + r)(rng.randbytes(800_000)),  # twice over
    }
    total = sum(map(len, bodies.values()))
    files, out = _written(tmp_path, bodies, room=total)
    coder = {name: c for c, names in _folders(out) for name in names}
    assert coder["modules/a/a.snapshot.1.pb"] == coder["modules/b/b.snapshot.2.pb"] == "COPY"
    assert coder["modules/d/d.snapshot.4.pb"] == coder["modules/e/e.snapshot.5.pb"] == "LZMA2"
    assert coder["modules/a/a.before_optimizations.txt"] == "LZMA2"
    for name, path in files.items():
        assert read_member(out, name, 1 << 30) == path.read_bytes()
    with py7zr.SevenZipFile(out) as z:
        assert z.testzip() is None  # each member's CRC, in a stored folder of two too
    _seven_zip_reads(out)  # the stored folders too
    # One byte short of room for everything as it is: packed, as before.
    (tmp_path / "tight").mkdir()
    _, tight = _written(tmp_path / "tight", bodies, room=total - 1)
    assert "COPY" not in {c for c, _ in _folders(tight)}
    assert tight.stat().st_size < out.stat().st_size


def test_zip_stores_what_deflate_would_pack_little_within_the_room(tmp_path: Path) -> None:
    rng = random.Random(19)
    bodies = {
        "weights.pb": _weights_file(rng, 400_000),
        "zeros.pb": bytes(1_500_000),
        "small.pb": rng.randbytes(100_000),  # too small to be worth the test
    }
    files, out = _written(tmp_path, bodies, "zip", room=sum(map(len, bodies.values())))
    with zipfile.ZipFile(out) as z:
        kinds = {i.filename: i.compress_type for i in z.infolist()}
        assert all(z.read(name) == path.read_bytes() for name, path in files.items())
    assert kinds == {
        "weights.pb": zipfile.ZIP_STORED,
        "zeros.pb": zipfile.ZIP_DEFLATED,
        "small.pb": zipfile.ZIP_DEFLATED,
    }
    (tmp_path / "none").mkdir()
    _, packed = _written(tmp_path / "none", bodies, "zip")
    with zipfile.ZipFile(packed) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}


def test_not_worth_packing_reads_many_small_samples(tmp_path: Path) -> None:
    """Four large samples weigh the ones at the end of a snapshot as a quarter of it."""
    rng = random.Random(23)
    cases = {
        "weights": (_weights_file(rng, 1_000_000), True),
        "random": (rng.randbytes(1_000_000), True),
        "half zeros": (rng.randbytes(500_000) + bytes(500_000), False),
        "text": ("".join(f"%x.{j} = f32[8] add(%p, %q)\n" for j in range(40_000)).encode(), False),
        "empty": (b"", False),
    }
    for name, (body, expected) in cases.items():
        (tmp_path / name).write_bytes(body)
        assert packing.not_worth_packing(tmp_path / name) is expected, name
    assert not packing.not_worth_packing(tmp_path / "gone")


def test_the_header_is_packed_and_py7zr_left_as_it_was(tmp_path: Path, parallel: None) -> None:
    before = py7zr.properties.DEFAULT_FILTERS.ENCODED_HEADER_FILTER
    src = tmp_path / "src"
    src.mkdir()
    for small in (False, True):
        out = tmp_path / f"b{small}.7z"
        write_archive(_files(src, n=3 if small else 24), out, "7z")
        data = out.read_bytes()
        offset = int.from_bytes(data[12:20], "little")
        assert data[32 + offset] == 0x17  # kEncodedHeader: the header is LZMA-packed
        with py7zr.SevenZipFile(out) as z:
            assert z.testzip() is None
    assert before == py7zr.properties.DEFAULT_FILTERS.ENCODED_HEADER_FILTER
