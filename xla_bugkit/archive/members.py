"""The vocabulary of archive reading: members as an archive declares them, the sinks their
bytes stream into, the reader protocol each format implements, and which names are safe."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CHUNK = 1 << 20
FILE, DIR, SYMLINK, HARDLINK, SPECIAL = "file", "directory", "symlink", "hard link", "special file"

_DRIVE = re.compile(r"^[A-Za-z]:")


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
