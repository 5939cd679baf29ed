"""The vocabulary of archive reading: members as an archive declares them, what a trusted list
says they must be, the sinks their bytes stream into, the reader protocol each format
implements, and which names are safe."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CHUNK = 1 << 20
FILE, DIR, SYMLINK, HARDLINK, SPECIAL = "file", "directory", "symlink", "hard link", "special file"
# Far beyond any bundle (modules/<label>/pjrt/<file> is 4 deep; a Linux file name is at most
# 255 bytes), and low enough that a hostile name is refused before a directory is made for it.
MAX_DEPTH = 32
MAX_COMPONENT = 255
MAX_NAME = 1024

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Member:
    """One member as the archive declares it; name, size and kind are untrusted claims."""

    name: str
    size: int
    kind: str
    index: int


@dataclass(frozen=True)
class Expected:
    """What one member must be, as a list the caller trusts more than the archive says (a
    bundle's manifest): exactly ``size`` bytes hashing to ``sha256``; or, with ``slack``, a
    file its sender may have edited, of any content up to ``size + slack`` bytes."""

    size: int
    sha256: str
    slack: int = 0


class Sink(Protocol):
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


def normalize(name: str) -> str:
    """``name`` without empty and ``.`` components (``./a//b/`` is ``a/b``)."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def shown(name: str) -> str:
    """``name`` quoted for a message, cut short: a hostile name can be many kilobytes long."""
    return repr(name) if len(name) <= 200 else f"{name[:160]!r}... ({len(name)} characters)"


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
    return _length_problem(name)


def _length_problem(name: str) -> str | None:
    # surrogatepass: tar names carry undecodable bytes as surrogates; count them as bytes too.
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
        return f"name longer than {MAX_NAME} bytes"
    parts = normalize(name).split("/")
    if len(parts) > MAX_DEPTH:
        return f"more than {MAX_DEPTH} levels deep"
    if any(len(p.encode("utf-8", "surrogatepass")) > MAX_COMPONENT for p in parts):
        return f"a path component longer than {MAX_COMPONENT} bytes"
    return None


OpenSink = Callable[[Member], Sink]
# Called with each member as the archive lists it, before any of its data is read (a tar
# member's before it is decompressed): raises to refuse the archive there.
Vet = Callable[[Member], None]


class Reader(Protocol):
    members: list[Member]
    current: str | None  # the member being streamed, to name it in a CRC error

    def stream(
        self, wanted: Sequence[Member], open_sink: OpenSink, root: Path | None = None
    ) -> None:
        """Stream ``wanted`` members into sinks; ``root``: where they will land, if on disk."""
