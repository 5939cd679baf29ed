"""Where an extracted member's bytes go, checked as they arrive.

The sizes an archive declares can lie, and a manifest can disagree with the bytes it lists:
each chunk is counted against the member's declared size, the archive's budget and the size
the manifest lists before it is written, and hashed, so that a member is refused as soon as
its bytes say so rather than after they have filled the disk.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.archive.members import Expected, Member, normalize, shown
from xla_bugkit.archive.plan import Budget, mismatch
from xla_bugkit.errors import DISK_FULL_ERRNOS, BadBundleError, BugkitError, DiskFullError


class CheckedSink:
    """One member's bytes: checked, then written to ``target`` (a new file) if there is one.

    With an exact ``expected`` entry, the member must hash to its sha256; that is checked the
    moment its listed size is reached, and by ``verify`` once the archive is read (a member
    cut short never reaches it)."""

    def __init__(
        self,
        path: Path,
        member: Member,
        budget: Budget,
        expected: Expected | None,
        target: Path | None,
    ) -> None:
        self._path, self._member, self._budget = path, member, budget
        self._name = normalize(member.name)
        self._expected = expected if expected is not None and not expected.slack else None
        self._hash = hashlib.sha256()
        self._written = 0
        self._file: BinaryIO | None = None
        if target is not None:
            try:
                self._file = target.open("xb")  # O_EXCL: never reuse an existing file
            except OSError as e:
                raise write_error(path, member.name, e) from None

    def write(self, data: bytes) -> None:
        self._written += len(data)
        if self._written > self._member.size:
            name = shown(self._member.name)
            raise BadBundleError(f"{self._path}: {name} holds more data than its header declares")
        self._budget.take(len(data), self._member.name)
        if self._expected is not None:
            self._hash.update(data)
            if self._written >= self._expected.size:
                self.verify()
        if self._file is not None:
            try:
                self._file.write(data)
            except OSError as e:
                raise write_error(self._path, self._member.name, e) from None

    def verify(self) -> None:
        """Refuse the member unless it is exactly what the manifest lists (if it is listed)."""
        e = self._expected
        if e is not None and (self._written != e.size or self._hash.hexdigest() != e.sha256):
            raise mismatch(self._name)

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            try:
                self._file.close()
            except OSError as e:
                raise write_error(self._path, self._member.name, e) from None


def write_error(path: Path, name: str, e: OSError) -> BugkitError:
    if e.errno in DISK_FULL_ERRNOS:
        return DiskFullError(f"no space left to extract {path} ({shown(name)}): {e.strerror}")
    if isinstance(e, FileExistsError):
        return BadBundleError(
            f"{path}: refusing entry {shown(name)}: it collides with another entry"
        )
    return BadBundleError(f"{path}: cannot extract {shown(name)}: {e.strerror}")
