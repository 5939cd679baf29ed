"""The tar.gz stream reader: gzip's own checks kept, what follows its data capped, and the
seeks tarfile makes served without decompressing anything twice."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

import pytest

from tests.helpers.hostile import write_raw
from xla_bugkit.archive import list_entries
from xla_bugkit.archive.gunzip import MAX_PADDING, GunzipStream
from xla_bugkit.errors import BadBundleError

DATA = bytes(range(256)) * 4096  # 1 MiB


def _read(raw: bytes, size: int = 1 << 16) -> bytes:
    stream = GunzipStream(io.BytesIO(raw))
    parts = []
    while part := stream.read(size):
        parts.append(part)
    return b"".join(parts)


@pytest.mark.parametrize("size", [509, 1 << 20, -1])
def test_reads_what_gzip_wrote_in_any_read_size(size: int) -> None:
    assert _read(gzip.compress(DATA), size) == DATA


def test_reads_concatenated_members_and_a_little_zero_padding() -> None:
    raw = gzip.compress(b"one ") + gzip.compress(b"two") + bytes(4096)
    assert _read(raw) == b"one two"


def test_refuses_more_padding_than_allowed() -> None:
    with pytest.raises(gzip.BadGzipFile, match=f"over {MAX_PADDING} bytes of padding"):
        _read(gzip.compress(b"x") + bytes(MAX_PADDING + 1))


def test_refuses_junk_after_the_data() -> None:
    with pytest.raises(gzip.BadGzipFile, match="data after the end"):
        _read(gzip.compress(b"x") + b"\x01junk")


def test_refuses_a_bad_crc_and_a_cut() -> None:
    packed = bytearray(gzip.compress(DATA))
    packed[-8] ^= 0xFF  # the CRC32 in the trailer
    with pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
        _read(bytes(packed))
    with pytest.raises(EOFError):
        _read(gzip.compress(DATA)[:-100])
    with pytest.raises(zlib.error):
        _read(b"\x1f\x8b" + bytes(100))


def test_seeks_forward_and_back_into_the_last_record_only() -> None:
    stream = GunzipStream(io.BytesIO(gzip.compress(DATA)))
    stream.seek(300_000)
    assert stream.read(1000) == DATA[300_000:301_000]
    stream.seek(300_488)  # back into what was just read: served from what is kept
    assert stream.read(512) == DATA[300_488:301_000]
    assert stream.tell() == 301_000
    with pytest.raises(OSError, match="forward only"):
        stream.seek(0)


def test_raw_zeros_after_a_tar_gz_are_refused_at_the_cap(tmp_path: Path) -> None:
    path = write_raw("tar.gz", tmp_path / "b.tar.gz", [("f", b"data")])
    path.write_bytes(path.read_bytes() + bytes(MAX_PADDING + 1))
    with pytest.raises(BadBundleError, match=r"corrupt \(over 1048576 bytes of padding"):
        list_entries(path)
