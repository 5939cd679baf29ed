"""Reading archives: which format, what members, their bytes streamed into sinks.

Lists members and reads one in memory here; ``extract`` builds safe extraction on the same
readers. Nothing here writes to disk: members are streamed into sinks the caller provides,
and every error a library raises about the archive's bytes becomes one ``BadBundleError``
line.
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol

import py7zr
import py7zr.exceptions
from py7zr.io import Py7zIO, WriterFactory

from xla_bugkit.errors import BadBundleError, BugkitError

CHUNK = 1 << 20
FILE, DIR, SYMLINK, HARDLINK, SPECIAL = "file", "directory", "symlink", "hard link", "special file"

_SUFFIXES = ((".tar.gz", "tar.gz"), (".tgz", "tar.gz"), (".7z", "7z"), (".zip", "zip"))
_MAGIC = (
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),  # an empty zip is only its end record
    (b"\x1f\x8b", "tar.gz"),
)
_DRIVE = re.compile(r"^[A-Za-z]:")
# What the libraries raise when the archive's bytes are bad. OSError is here because gzip
# and zipfile report bad data as OSError subclasses (BadGzipFile, "Bad magic number").
_CORRUPT: tuple[type[BaseException], ...] = (
    py7zr.exceptions.ArchiveError,
    py7zr.exceptions.PasswordRequired,
    lzma.LZMAError,
    zipfile.BadZipFile,
    tarfile.TarError,
    EOFError,
    zlib.error,
    struct.error,
    NotImplementedError,  # zipfile: unsupported compression method
    OSError,
)


@dataclass(frozen=True)
class Member:
    """One member as the archive declares it; name, size and kind are untrusted claims."""

    name: str
    size: int
    kind: str
    index: int


class Sink(Protocol):
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


def suffix_format(path: Path) -> str | None:
    name = path.name.lower()
    return next((fmt for suffix, fmt in _SUFFIXES if name.endswith(suffix)), None)


def format_of(path: Path) -> str:
    """The archive format of ``path``: by suffix, else by its first bytes."""
    fmt = suffix_format(path) or _sniff(path)
    if fmt is None:
        raise BadBundleError(f"{path} is not a 7z, zip or tar.gz archive")
    return fmt


def _sniff(path: Path) -> str | None:
    with _readable(path), path.open("rb") as f:
        head = f.read(8)
    return next((fmt for magic, fmt in _MAGIC if head.startswith(magic)), None)


@contextlib.contextmanager
def _readable(path: Path) -> Iterator[None]:
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        raise BugkitError(f"cannot read {path}: {e.strerror}") from None


def normalize(name: str) -> str:
    """``name`` without empty and ``.`` components (``./a//b/`` is ``a/b``)."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def name_problem(name: str) -> str | None:
    """Why ``name`` may not be written under a destination directory, or None."""
    if "\x00" in name:
        return "NUL byte in the name"
    if "\\" in name:
        return "backslash in the name"
    if name.startswith("/"):
        return "absolute path"
    if _DRIVE.match(name):
        return "drive letter"
    if ".." in name.split("/"):
        return "'..' component"
    if not normalize(name):
        return "empty name"
    return None


OpenSink = Callable[[Member], Sink]


class Reader(Protocol):
    members: list[Member]
    current: str | None  # the member being streamed, to name it in a CRC error

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        """Stream ``wanted`` members into sinks; ``root``: where they will land, if on disk."""


@contextlib.contextmanager
def open_archive(path: Path, max_entries: int | None = None) -> Iterator[Reader]:
    """Open ``path`` and list its members (at most ``max_entries`` + 1 of them)."""
    with _readable(path), path.open("rb") as fp:
        fmt = format_of(path)
        head = fp.read(8)
        if not head:
            raise BadBundleError(f"{path} is empty, not an archive")
        if not any(head.startswith(magic) for magic, f in _MAGIC if f == fmt):
            raise BadBundleError(f"{path} is not a {fmt} archive (wrong signature)")
        fp.seek(0)
        reader: Reader | None = None
        try:
            reader = _READERS[fmt](path, fp, max_entries)
            yield reader
        except BugkitError:
            raise
        except _CORRUPT as e:
            detail = _detail(e, reader.current if reader else None)
            raise BadBundleError(f"{path} is truncated or corrupt ({detail})") from None


def _detail(e: BaseException, member: str | None) -> str:
    if isinstance(e, py7zr.exceptions.CrcError):
        return f"CRC mismatch in {e.filename or member or 'a data block'}"
    text = " ".join(str(e).split())[:200] or type(e).__name__
    if "CRC" in text:  # zipfile and gzip name the check, not always the member
        return f"CRC mismatch in {member or 'the compressed stream'}"
    return f"{text}, in {member}" if member else text


class _ZipReader:
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None) -> None:
        self.current: str | None = None
        self._zf = zipfile.ZipFile(fp)
        self._infos = self._zf.infolist()[: None if max_entries is None else max_entries + 1]
        self.members = [_zip_member(i, info) for i, info in enumerate(self._infos)]
        for info in self._infos:
            if info.flag_bits & 0x1:
                raise BadBundleError(f"{path}: {info.filename!r} is encrypted")

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        for m in wanted:
            self.current = m.name
            with self._zf.open(self._infos[m.index]) as src:
                _copy(src, open_sink(m))


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
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None) -> None:
        self.current: str | None = None
        self._path = path
        with _tar_pass(fp) as tf:
            infos: list[tarfile.TarInfo] = []
            for ti in tf:
                infos.append(ti)
                if max_entries is not None and len(infos) > max_entries:
                    break  # enough for the caller to refuse; skip the end-of-archive check
            else:
                _check_tar_end(path, tf)
        self.members = [_tar_member(i, ti) for i, ti in enumerate(infos)]

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        # A second, forward-only pass: seeking back in a gzip stream decompresses it again
        # from the start, once per member.
        by_index = {m.index: m for m in wanted}
        with self._path.open("rb") as fp, _tar_pass(fp) as tf:
            for i, ti in enumerate(tf):
                m = by_index.get(i)
                if m is None:
                    continue
                if _tar_member(i, ti) != m:
                    raise BadBundleError(f"{self._path} changed while it was being read")
                self.current = m.name
                src = tf.extractfile(ti)
                if src is None:
                    raise BadBundleError(f"{self._path}: {m.name!r} has no data")
                _copy(src, open_sink(m))
            self.current = None  # a gzip CRC error at the end is not the last member's fault
            _check_tar_end(self._path, tf)


@contextlib.contextmanager
def _tar_pass(fp: BinaryIO) -> Iterator[tarfile.TarFile]:
    # Our own GzipFile, so that _check_tar_end can read it to its end.
    with gzip.GzipFile(fileobj=fp, mode="rb") as gz, tarfile.open(fileobj=gz, mode="r:") as tf:
        yield tf


def _check_tar_end(path: Path, tf: tarfile.TarFile) -> None:
    """Refuse a tar that ended early, and verify the gzip CRC, which tarfile never does.

    tarfile stops at the first header it cannot parse as if the archive ended there, and
    stops reading before the gzip trailer. Everything after the last entry must be zeros.
    """
    gz = tf.fileobj
    assert gz is not None, "tarfile keeps its fileobj while open"
    gz.seek(tf.offset)
    while block := gz.read(CHUNK):
        if block.count(0) != len(block):
            raise BadBundleError(
                f"{path} is truncated or corrupt (unreadable tar header at byte {tf.offset})"
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
    def __init__(self, path: Path, fp: BinaryIO, max_entries: int | None) -> None:
        self.current: str | None = None
        # A file object, not a path: py7zr then decompresses in this thread, so our sinks'
        # exceptions reach us directly instead of through its worker threads.
        # max_entries does not apply: py7zr parses the whole header, bounded by the file size.
        self._sz = py7zr.SevenZipFile(fp, "r")
        self.members = [_7z_member(i, f) for i, f in enumerate(self._sz.files)]

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


def _copy(src: IO[bytes], sink: Sink) -> None:
    try:
        while chunk := src.read(CHUNK):
            sink.write(chunk)
    finally:
        sink.close()


_READERS: dict[str, Callable[[Path, BinaryIO, int | None], Reader]] = {
    "7z": _SevenZipReader,
    "zip": _ZipReader,
    "tar.gz": _TarReader,
}


@dataclass(frozen=True)
class Entry:
    """One member as the archive's directory lists it: name and size are its claims."""

    name: str
    size: int
    is_file: bool


def list_entries(path: Path) -> list[Entry]:
    """The members ``path`` declares, in archive order; nothing is extracted."""
    with open_archive(path) as reader:
        return [Entry(m.name, m.size, m.kind == FILE) for m in reader.members]


def read_member(path: Path, name: str, limit: int) -> bytes:
    """The bytes of the one member ``name``, read in memory; refused if over ``limit``."""
    with open_archive(path) as reader:
        member = _only_member(path, reader.members, name)
        if member.size > limit:
            raise BadBundleError(f"{path}: {name} is {member.size} bytes, over the {limit} allowed")
        sink = _BytesSink(path, name, limit)
        reader.stream([member], lambda _: sink)
        return bytes(sink.data)


def _only_member(path: Path, members: Sequence[Member], name: str) -> Member:
    found = [m for m in members if normalize(m.name) == normalize(name)]
    if not found:
        raise BadBundleError(f"{path} has no {name}")
    if len(found) > 1:  # which one a reader shows would be arbitrary
        raise BadBundleError(f"{path} has {name} more than once")
    if found[0].kind != FILE:
        raise BadBundleError(f"{path}: {name} is a {found[0].kind}, not a file")
    return found[0]


class _BytesSink:
    def __init__(self, path: Path, name: str, limit: int) -> None:
        self._path, self._name, self._limit = path, name, limit
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data
        if len(self.data) > self._limit:  # the declared size was a lie
            raise BadBundleError(f"{self._path}: {self._name} is over the {self._limit} allowed")

    def close(self) -> None:
        pass
