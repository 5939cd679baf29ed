"""One reader per archive format (zip, tar.gz, 7z): list the members, each vetted as it is
listed, and stream the wanted ones into sinks. Errors about the archive's bytes are left to
``read.open_archive`` to word."""

from __future__ import annotations

import contextlib
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO

import py7zr
from py7zr.io import Py7zIO, WriterFactory

from xla_bugkit.archive.gunzip import GunzipStream
from xla_bugkit.archive.members import (
    CHUNK,
    DIR,
    FILE,
    HARDLINK,
    SPECIAL,
    SYMLINK,
    Member,
    OpenSink,
    Reader,
    Sink,
    Vet,
    normalize,
)
from xla_bugkit.errors import BadBundleError

# What may follow a tar's last member: its end marker, padded to a record (10 KiB for most
# tools; `tar -b 2048` pads to 1 MiB). More is refused rather than decompressed to its end.
MAX_TAR_TAIL = 1 << 20


class _ZipReader:
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None, vet: Vet) -> None:
        self.current: str | None = None
        self._zf = zipfile.ZipFile(fp)
        self._infos = self._zf.infolist()[: None if max_entries is None else max_entries + 1]
        self.members = [_zip_member(i, info) for i, info in enumerate(self._infos)]
        for info, member in zip(self._infos, self.members, strict=True):
            if info.flag_bits & 0x1:
                raise BadBundleError(f"{path}: {info.filename!r} is encrypted")
            vet(member)

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        for m in wanted:
            self.current = m.name
            with self._zf.open(self._infos[m.index]) as src:
                copy_into(src, open_sink(m))


def _zip_member(index: int, info: zipfile.ZipInfo) -> Member:
    mode = info.external_attr >> 16  # unix st_mode, when the creator stored one
    if info.is_dir() or stat.S_ISDIR(mode):
        kind = DIR
    elif stat.S_ISLNK(mode):
        kind = SYMLINK
    elif stat.S_IFMT(mode) in (0, stat.S_IFREG):
        kind = FILE
    else:
        kind = SPECIAL
    return Member(info.filename, info.file_size, kind, index)


class _TarReader:
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None, vet: Vet) -> None:
        self.current: str | None = None
        self._path = path
        self.members: list[Member] = []
        with _tar_pass(fp) as tf:
            for ti in tf:
                # Vetted here, before the next header is looked for: a member refused by its
                # header is refused before its data is decompressed.
                self.members.append(_tar_member(len(self.members), ti))
                vet(self.members[-1])
                if max_entries is not None and len(self.members) > max_entries:
                    break  # enough for the caller to refuse; skip the end-of-archive check
            else:
                _check_tar_end(path, tf)

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        # A second, forward-only pass: seeking back in a gzip stream decompresses it again
        # from the start, once per member. It stops after the last member wanted: the
        # listing pass has read the rest, checked the tar's end and the gzip CRC.
        left = {m.index: m for m in wanted}
        if not left:
            return
        with self._path.open("rb") as fp, _tar_pass(fp) as tf:
            for i, ti in enumerate(tf):
                m = left.pop(i, None)
                if m is None:
                    continue
                if _tar_member(i, ti) != m:
                    break
                self.current = m.name
                src = tf.extractfile(ti)
                if src is None:
                    raise BadBundleError(f"{self._path}: {m.name!r} has no data")
                copy_into(src, open_sink(m))
                if not left:
                    return
        raise BadBundleError(f"{self._path} changed while it was being read")


@contextlib.contextmanager
def _tar_pass(fp: BinaryIO) -> Iterator[tarfile.TarFile]:
    # Our own stream, so that _check_tar_end can read it to its end, and cheaply.
    # tarfile reads any object with read, seek and tell; its stubs ask for an IO[bytes].
    with tarfile.open(fileobj=GunzipStream(fp), mode="r:") as tf:  # type: ignore[call-overload]
        yield tf


def _check_tar_end(path: Path, tf: tarfile.TarFile) -> None:
    """Refuse a tar that ended early, and verify the gzip CRC, which tarfile never does.

    tarfile stops at the first header it cannot parse as if the archive ended there, and
    stops reading before the gzip trailer. Everything after the last entry must be zeros,
    and no more of them than a tar's padding.
    """
    stream = tf.fileobj
    assert stream is not None, "tarfile keeps its fileobj while open"
    stream.seek(tf.offset)
    tail = 0
    while block := stream.read(CHUNK):
        if block.count(0) != len(block):
            raise BadBundleError(
                f"{path} is truncated or corrupt (unreadable tar header at byte {tf.offset})"
            )
        tail += len(block)
        if tail > MAX_TAR_TAIL:
            raise BadBundleError(
                f"{path} has over {MAX_TAR_TAIL} bytes of zeros after its last member; "
                "refusing it rather than reading them all"
            )


def _tar_member(index: int, ti: tarfile.TarInfo) -> Member:
    if ti.isreg():
        kind = FILE
    elif ti.isdir():
        kind = DIR
    elif ti.issym():
        kind = SYMLINK
    elif ti.islnk():
        kind = HARDLINK
    else:
        kind = SPECIAL
    return Member(ti.name, ti.size, kind, index)


class _SevenZipReader:
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None, vet: Vet) -> None:
        self.current: str | None = None
        # A file object, not a path: py7zr then decompresses in this thread, so our sinks'
        # exceptions reach us directly instead of through its worker threads.
        # max_entries does not apply: py7zr parses the whole header, bounded by the file size.
        self._sz = py7zr.SevenZipFile(fp, "r")
        self.members = [_7z_member(i, f) for i, f in enumerate(self._sz.files)]
        for member in self.members:
            vet(member)

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        # py7zr checks names against a real directory even when a factory takes the bytes.
        # Without a destination, "/" passes that check for every name, exists (so py7zr
        # creates nothing) and, unlike the cwd, has no symlink that could fail it spuriously.
        path = root or Path("/").resolve()
        factory = _SinkFactory(self, path, {normalize(m.name): m for m in wanted}, open_sink)
        try:
            self._sz.extract(path=path, targets=[m.name for m in wanted], factory=factory)
        finally:
            factory.close_all()


def _7z_member(index: int, f: py7zr.py7zr.ArchiveFile) -> Member:
    fmt = f.st_fmt
    if f.is_directory:
        kind = DIR
    elif f.is_symlink or f.is_junction:
        kind = SYMLINK
    elif f.is_socket or fmt not in (None, stat.S_IFREG):
        kind = SPECIAL
    else:
        kind = FILE
    return Member(f.filename, f.uncompressed or 0, kind, index)


class _SinkFactory(WriterFactory):
    """Hands py7zr a sink per member it decompresses: py7zr 1.x's streaming interface."""

    def __init__(
        self, reader: _SevenZipReader, root: Path, wanted: dict[str, Member], open_sink: OpenSink
    ) -> None:
        self._reader, self._root, self._wanted, self._open_sink = reader, root, wanted, open_sink
        self._sinks: list[Sink] = []

    def create(self, filename: str) -> Py7zIO:
        # py7zr names the output root/<its own sanitized name>; map it back to our member.
        rel = Path(filename)
        with contextlib.suppress(ValueError):
            rel = rel.relative_to(self._root)
        member = self._wanted.get(normalize(rel.as_posix()))
        if member is None or rel.is_absolute():  # py7zr named it unlike us: fail closed
            raise BadBundleError(f"unexpected member {filename!r}")
        self._reader.current = member.name
        sink = self._open_sink(member)
        self._sinks.append(sink)
        return _SinkIO(sink)

    def close_all(self) -> None:
        for sink in self._sinks:
            sink.close()


class _SinkIO(Py7zIO):
    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._size = 0

    def write(self, s: bytes | bytearray) -> int:
        self._sink.write(bytes(s))
        self._size += len(s)
        return len(s)

    def read(self, size: int | None = None) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def flush(self) -> None:
        pass

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._sink.close()


def copy_into(src: IO[bytes], sink: Sink) -> None:
    """Every byte of ``src`` into ``sink``, which is closed after (a ``Reader``'s stream)."""
    try:
        while chunk := src.read(CHUNK):
            sink.write(chunk)
    finally:
        sink.close()


READERS: dict[str, Callable[[Path, BinaryIO, int | None, Vet], Reader]] = {
    "7z": _SevenZipReader,
    "zip": _ZipReader,
    "tar.gz": _TarReader,
}
