"""Reading archives: which format, what members, their bytes streamed into sinks.

Lists members and reads one in memory here; ``extract`` builds safe extraction on the same
readers. Nothing here writes to disk: members are streamed into sinks the caller provides,
and every error a library raises about the archive's bytes becomes one ``BadBundleError``
line.
"""

from __future__ import annotations

import contextlib
import lzma
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import py7zr
import py7zr.exceptions

from xla_bugkit.archive.folder import DirReader, open_inside
from xla_bugkit.archive.formats import READERS
from xla_bugkit.archive.members import FILE, Member, Reader, Vet, name_problem, normalize
from xla_bugkit.archive.naming import suffix_format
from xla_bugkit.archive.plan import Budget
from xla_bugkit.errors import BadBundleError, BugkitError

_MAGIC = (
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),  # an empty zip is only its end record
    (b"\x1f\x8b", "tar.gz"),
)
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


@contextlib.contextmanager
def open_archive(
    path: Path, max_entries: int | None = None, vet: Vet | None = None
) -> Iterator[Reader]:
    """Open ``path`` and list its members (at most ``max_entries`` + 1 of them), passing each
    to ``vet`` as it is listed."""
    if _is_folder(path):
        with _readable(path):
            yield DirReader(path, max_entries, vet or _accept)
        return
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
            reader = READERS[fmt](path, fp, max_entries, vet or _accept)
            yield reader
        except BugkitError:
            raise
        except _CORRUPT as e:
            detail = _detail(e, reader.current if reader else None)
            raise BadBundleError(f"{path} is truncated or corrupt ({detail})") from None


def _accept(member: Member) -> None:
    pass


def _detail(e: BaseException, member: str | None) -> str:
    if isinstance(e, py7zr.exceptions.CrcError):
        return f"CRC mismatch in {e.filename or member or 'a data block'}"
    text = " ".join(str(e).split())[:200] or type(e).__name__
    if "CRC" in text:  # zipfile and gzip name the check, not always the member
        return f"CRC mismatch in {member or 'the compressed stream'}"
    return f"{text}, in {member}" if member else text


@dataclass(frozen=True)
class Entry:
    """One member as the archive's directory lists it: name and size are its claims."""

    name: str
    size: int
    is_file: bool


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a bundle unpacked by hand into a folder (the user's own link to
    one is followed, as a link to an archive is; a link inside it never is)."""
    return path.is_dir()


def archive_size(path: Path) -> int | None:
    """The archive's size; None for a folder, whose files hold their bytes as they are:
    there is no decompression to bound by a ratio."""
    if _is_folder(path):
        return None
    with _readable(path):
        return path.stat().st_size


def list_entries(path: Path) -> list[Entry]:
    """The members ``path`` declares, in archive order; nothing is extracted. An archive
    that declares more entries or bytes than extraction allows (``plan.Budget``) is
    refused."""
    budget = Budget(path, archive_size(path))
    with open_archive(path, budget.max_entries, budget.declare) as reader:
        return [Entry(m.name, m.size, m.kind == FILE) for m in reader.members]


def read_member(path: Path, name: str, limit: int) -> bytes:
    """The bytes of the one member ``name``, read in memory; refused if over ``limit``, or if
    the archive declares more entries or bytes than extraction allows (``plan.Budget``)."""
    if _is_folder(path):
        return _read_from_folder(path, name, limit)
    budget = Budget(path, archive_size(path))
    with open_archive(path, budget.max_entries, budget.declare) as reader:
        member = _only_member(path, reader.members, name)
        if member.size > limit:
            raise BadBundleError(f"{path}: {name} is {member.size} bytes, over the {limit} allowed")
        sink = _BytesSink(path, name, limit)
        reader.stream([member], lambda _: sink)
        return bytes(sink.data)


def _read_from_folder(path: Path, name: str, limit: int) -> bytes:
    """``read_member`` of a folder: the one file opened where it lies, without walking the
    folder first (a folder given by mistake, a home, is not read end to end to learn that
    it holds no manifest)."""
    problem = name_problem(name)
    if problem is not None:
        raise BadBundleError(f"refusing entry {name!r}: {problem}")
    try:
        src = open_inside(path, normalize(name))
    except FileNotFoundError:
        raise BadBundleError(f"{path} has no {name}") from None
    with src:
        data = src.read(limit + 1)
    if len(data) > limit:
        raise BadBundleError(f"{path}: {name} is over the {limit} allowed")
    return data


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
