"""Hostile archives built for real, in the three formats, and a tally of what extraction lets
through; shared by the archive, bundle and show tests.

Big members are zeros: megabytes in the archive's headers and streams, kilobytes on disk.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import warnings
import zipfile
from pathlib import Path

import py7zr
import pytest

from xla_bugkit.archive import gunzip, sinks

SUFFIX = {"7z": ".7z", "zip": ".zip", "tar.gz": ".tar.gz"}
# One path 30,000 folders deep: extracting it once cost 155 s and ended in a RecursionError.
DEEP = "a/" * 30_000 + "f"


def write_raw(fmt: str, path: Path, members: list[tuple[str, bytes]]) -> Path:
    """An archive holding exactly ``members``, names unchecked (they may be hostile)."""
    if fmt == "zip":
        with warnings.catch_warnings(), zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            warnings.simplefilter("ignore")  # "Duplicate name": exactly what we want
            for name, data in members:
                zf.writestr(name, data)
    elif fmt == "tar.gz":
        with tarfile.open(path, "w:gz") as tf:
            _add_tar_members(tf, members)
    else:
        with py7zr.SevenZipFile(path, "w") as sz:
            for name, data in members:
                # The private _writestr skips py7zr's own name check: a hostile writer would.
                sz._writestr(data, name)
    return path


def _add_tar_members(tf: tarfile.TarFile, members: list[tuple[str, bytes]]) -> None:
    for name, data in members:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))


def tar_with_zeros_after(path: Path, members: list[tuple[str, bytes]], zeros: int) -> Path:
    """A tar.gz whose tar stream goes on with ``zeros`` zero bytes after its end marker."""
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w:") as tf:
            _add_tar_members(tf, members)
        for _ in range(zeros >> 20):
            gz.write(bytes(1 << 20))
    return path


def patch_zip_size(path: Path, name: str, size: int) -> None:
    """Make the zip's local and central headers of ``name`` declare ``size`` bytes."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    local = data.index(b"PK\x03\x04")
    while data[local + 30 : local + 30 + len(encoded)] != encoded:
        local = data.index(b"PK\x03\x04", local + 4)
    data[local + 22 : local + 26] = size.to_bytes(4, "little")
    central = data.index(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(encoded)] != encoded:
        central = data.index(b"PK\x01\x02", central + 4)
    data[central + 24 : central + 28] = size.to_bytes(4, "little")
    path.write_bytes(bytes(data))


class Tally:
    """Bytes that reached extraction's sinks (to disk, or to the hash for ``check_archive``),
    and bytes a tar.gz's stream decompressed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sunk: dict[str, int] = {}
        self.decompressed = 0
        write, decompress = sinks.CheckedSink.write, gunzip.GunzipStream._decompress

        def counted_write(sink: sinks.CheckedSink, data: bytes) -> None:
            name = sink._member.name
            self.sunk[name] = self.sunk.get(name, 0) + len(data)
            write(sink, data)

        def counted_decompress(stream: gunzip.GunzipStream, limit: int) -> bytes:
            data = decompress(stream, limit)
            self.decompressed += len(data)
            return data

        monkeypatch.setattr(sinks.CheckedSink, "write", counted_write)
        monkeypatch.setattr(gunzip.GunzipStream, "_decompress", counted_decompress)

    @property
    def total(self) -> int:
        return sum(self.sunk.values())


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` and ``root`` itself: its mode, size and modification time."""
    found = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        found[path.relative_to(root).as_posix()] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found
