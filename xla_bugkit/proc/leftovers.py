"""What a killed xla-bugkit leaves behind, and the proof of whose it is.

A SIGKILL (the OOM killer's, a scheduler's) runs no cleanup: collect's work dir, its temp
folder and the archive's partial output stay on disk. Each of them carries its owner: the
process that made it, as its pid and start time (``/proc/<pid>/stat`` field 22, so that a
reused pid is not taken for it), with a hash of the machine and pid namespace it ran in and
one of the boot. The next collect removes only what carries an owner that has provably
ended; a folder or file without one, another user's, or one whose owner is still running (two
collects may run side by side) or cannot be judged from here (another machine sharing the
folder over NFS, another container) is left alone.

A folder's owner is a ``MARKER`` file inside it, removed again when the folder is meant to
outlive its process (a kept work dir); a partial output's is in its name (``partial_prefix``),
since it sits in the user's folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = ".xla-bugkit-owner"
TEMP_PREFIX = "xla-bugkit-run-"  # collect's temp folder (``temp_folder``)
_TAG = "xla-bugkit owner "
_TOKEN = r"(\d+)-(\d+)-([0-9a-f]{8})-([0-9a-f]{8})"
# mkstemp's names end in 8 characters of its own alphabet.
_PARTIAL = re.compile(rf"\..+\.partial-({_TOKEN})-[a-z0-9_]{{8}}")
_NAME_MAX = 255


@dataclass(frozen=True)
class Owner:
    """The process that made a folder or file."""

    pid: int
    start: int  # clock ticks from boot to its start: with the pid, names one process
    place: str  # hash of the host name and pid namespace, where ``pid`` means that process
    boot: str  # hash of the boot id

    @property
    def token(self) -> str:
        return f"{self.pid}-{self.start}-{self.place}-{self.boot}"

    @classmethod
    def parse(cls, token: str) -> Owner | None:
        m = re.fullmatch(_TOKEN, token)
        if m is None:
            return None
        return cls(int(m[1]), int(m[2]), m[3], m[4])

    def gone(self) -> bool:
        """Whether this process has ended; False wherever that cannot be told from here."""
        here = this_process()
        if here is None or self.place != here.place:
            return False
        if self.boot != here.boot:
            return True  # this machine was restarted since
        return _start_time(self.pid) != self.start


def this_process() -> Owner | None:
    """This process as an owner; None where /proc cannot tell (not Linux)."""
    pid = os.getpid()
    start = _start_time(pid)
    try:
        namespace = os.readlink("/proc/self/ns/pid")
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    if start is None:
        return None
    return Owner(pid, start, _hash(f"{socket.gethostname()}\0{namespace}"), _hash(boot))


def _start_time(pid: int) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        # The command name (field 2) may hold spaces and parentheses: count from its end.
        return int(stat_line.rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def mark(folder: Path) -> None:
    """Make this process ``folder``'s owner; nothing where it cannot be told (not Linux)."""
    owner = this_process()
    if owner is not None:
        (folder / MARKER).write_text(f"{_TAG}{owner.token}\n", "utf-8")


def release(folder: Path) -> None:
    """Let ``folder`` outlive its owner: no later collect will remove it."""
    (folder / MARKER).unlink(missing_ok=True)


def owner_of(folder: Path) -> Owner | None:
    marker = folder / MARKER
    try:
        if not stat.S_ISREG(marker.lstat().st_mode):
            return None
        text = marker.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return Owner.parse(text.removeprefix(_TAG).strip()) if text.startswith(_TAG) else None


@dataclass(frozen=True)
class Leftover:
    """A folder or file whose owner has ended."""

    path: Path
    owner: Owner


def killed_folders(parent: Path, pattern: str) -> list[Leftover]:
    """The folders in ``parent`` named like ``pattern`` whose marked owner has ended."""
    found = []
    for path in _ours(parent, pattern, stat.S_ISDIR):
        owner = owner_of(path)
        if owner is not None and owner.gone():
            found.append(Leftover(path, owner))
    return found


def partial_prefix(out: Path) -> str:
    """The start of the name of ``out``'s partial output (``mkstemp`` adds 8 characters),
    which names this process as its owner where the name has room for it."""
    plain = f".{out.name}.partial-"
    owner = this_process()
    owned = plain if owner is None else f"{plain}{owner.token}-"
    return owned if len(os.fsencode(owned)) + 8 <= _NAME_MAX else plain


def killed_partials(folder: Path) -> list[Leftover]:
    """The partial outputs in ``folder`` (``partial_prefix``) whose owner has ended."""
    found = []
    for path in _ours(folder, ".*.partial-*", stat.S_ISREG):
        m = _PARTIAL.fullmatch(path.name)
        owner = Owner.parse(m[1]) if m else None
        if owner is not None and owner.gone():
            found.append(Leftover(path, owner))
    return found


def _ours(parent: Path, pattern: str, is_kind: Callable[[int], bool]) -> list[Path]:
    """What in ``parent`` matches ``pattern``, is of the kind (no link) and is this user's."""
    uid = os.geteuid()
    found = []
    try:
        for path in parent.glob(pattern):
            with contextlib.suppress(OSError):
                st = path.lstat()
                if is_kind(st.st_mode) and st.st_uid == uid:
                    found.append(path)
    except OSError:
        pass
    return sorted(found)


@contextlib.contextmanager
def temp_folder() -> Iterator[Path]:
    """A marked folder of this process's own that holds every temp file and folder made in
    the block (``tempfile.tempdir`` points there), removed at its end; should the process be
    killed, the next collect removes it (``killed_temp_folders``).

    ``tempfile.tempdir`` is the whole process's: only a process that is all xla-bugkit's
    (the CLI) may use this; another thread's temp files would go there too.
    """
    folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    saved = tempfile.tempdir
    try:
        mark(folder)
        tempfile.tempdir = str(folder)
        yield folder
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(folder, ignore_errors=True)


def killed_temp_folders() -> list[Leftover]:
    """``temp_folder``'s folders whose owner has ended, in the system's temp folder."""
    base = Path(tempfile.gettempdir())
    if base.name.startswith(TEMP_PREFIX) and owner_of(base) == this_process():
        base = base.parent  # inside ``temp_folder``: look where it was made
    return killed_folders(base, TEMP_PREFIX + "*")


def remove(found: Sequence[Leftover]) -> str | None:
    """Remove ``found``; the line that says what went, None when nothing did."""
    size, pids = 0, set()
    for leftover in found:
        removed = _remove(leftover.path)
        if removed is not None:
            size += removed
            pids.add(leftover.owner.pid)
    if not pids:
        return None
    listed = ", ".join(map(str, sorted(pids)))
    who = (
        f"a killed xla-bugkit (pid {listed})"
        if len(pids) == 1
        else f"{len(pids)} killed xla-bugkit runs (pids {listed})"
    )
    return f"removed {_size(size)} left by {who}"


def _remove(path: Path) -> int | None:
    """Delete ``path``; the bytes it held, None when it could not be deleted."""
    if path.is_file():
        try:
            size = path.lstat().st_size
            path.unlink()
        except OSError:
            return None  # gone already (another collect removed it), or not ours to delete
        return size
    size = _tree_size(path)
    try:
        for child in path.iterdir():
            if child.name != MARKER:
                _delete(child)
        # The marker goes last: a deletion cut short stays owned, and the next one ends it.
        if [child.name for child in path.iterdir()] == [MARKER]:
            release(path)
            path.rmdir()
    except OSError:
        pass
    return None if path.exists() else size


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _tree_size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _size(n: int) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.0f} MB"
    return f"{n / 1e3:.1f} kB" if n >= 1e3 else f"{n} bytes"


def write_whole(path: Path, data: bytes | Sequence[bytes | bytearray | memoryview]) -> None:
    """``data`` (bytes, or parts written one after another) into ``path`` all at once,
    through a partial file beside it renamed over it: a partial file never takes its place,
    and a failed write (or Ctrl-C) leaves none behind."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                f.writelines(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
