"""Releases unpacked once and kept: a cache of jaxlib (and jax) wheels, unzipped into one
folder per release, which a replay child puts first on its path; and of libtpu wheels,
whose ``libtpu.so`` a TPU replay child loads (``compiler``). No virtual environment per
release: the child keeps this interpreter's numpy, ml_dtypes and protobuf, but for a release
that needs numpy 1 or another Python, which gets its own beside it.

The cache lives in platformdirs' user cache dir (``releases/``), or under
``$XLA_BUGKIT_CACHE``. A release is used only once it is whole (its ``.complete`` marker, which
records its size, and whose time is its last use); a download or unzip cut short leaves a
partial folder that the next attempt removes. The releases used longest ago make room for a
new one when the cache would pass its limit (``$XLA_BUGKIT_CACHE_LIMIT``, 4 GB by default:
about eleven releases).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import platformdirs

from xla_bugkit import config, proc
from xla_bugkit.errors import BugkitError
from xla_bugkit.releases import index, libtpu
from xla_bugkit.replay import CompilerRelease, Release

CACHE_ENV = "XLA_BUGKIT_CACHE"
LIMIT_ENV = "XLA_BUGKIT_CACHE_LIMIT"
DEFAULT_LIMIT = 4 * 10**9
_COMPLETE = ".complete"
DOWNLOAD_TIMEOUT = 600.0
# Room kept free on the cache's disk beyond what a release unpacks to.
_HEADROOM = 200 << 20


def root() -> Path:
    """The folder that holds the unpacked releases."""
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path(platformdirs.user_cache_dir("xla-bugkit"))


def folder(version: str, python: str | None = None) -> Path:
    return root() / "releases" / f"jaxlib-{version}-{index.python_tag(python)}"


def cached(version: str, python: str | None = None) -> Release | None:
    """The release, if it is in the cache whole; ``python``: for that interpreter."""
    path = folder(version, python)
    return Release(version, path, python) if (path / _COMPLETE).is_file() else None


@dataclass(frozen=True)
class Entry:
    """A release in the cache."""

    version: str
    path: Path
    size: int  # bytes unpacked
    used: float  # when it was last used (its marker's time), seconds since the epoch

    @property
    def dist(self) -> str:
        """What it is a release of: "jaxlib" or "libtpu" (the folder's name starts with it)."""
        return self.path.name.split("-", 1)[0]

    @property
    def python_tag(self) -> str:
        """The Python a jaxlib was unpacked for: "cp312" (the folder's name ends with it);
        "" for a libtpu, which serves any."""
        return self.path.name.rsplit("-", 1)[-1] if self.dist == "jaxlib" else ""


def entries() -> list[Entry]:
    """The releases in the cache, whole ones only, the one used longest ago first."""
    found = []
    for marker in (root() / "releases").glob(f"*/{_COMPLETE}"):
        try:
            lines = marker.read_text("utf-8").split()
            used = marker.stat().st_mtime
        except OSError:
            continue
        size = int(lines[1]) if len(lines) > 1 and lines[1].isdigit() else _size(marker.parent)
        found.append(Entry(lines[0] if lines else "?", marker.parent, size, used))
    return sorted(found, key=lambda e: e.used)


def limit() -> int:
    """The cache's limit in bytes: ``$XLA_BUGKIT_CACHE_LIMIT`` ("8GB"), or ``DEFAULT_LIMIT``."""
    text = os.environ.get(LIMIT_ENV)
    if not text:
        return DEFAULT_LIMIT
    try:
        return config.parse_size(text)
    except ValueError as e:
        raise BugkitError(f"{LIMIT_ENV}: {e}") from None


def clear() -> list[Entry]:
    """Remove every release (and what a cut-short download left); the releases removed."""
    gone = entries()
    shutil.rmtree(root() / "releases", ignore_errors=True)
    return gone


def release(version: str, wheels: Path | None = None, python: str | None = None) -> Release:
    """``version`` unpacked in the cache: from ``wheels`` (a folder of wheels) if given,
    else downloaded through pip. ``python``: for another interpreter, whose release comes
    with the numpy, ml_dtypes and the rest it needs, built for it (this interpreter's serve
    its own). Raises ``BugkitError`` saying why it cannot be had."""
    if (found := cached(version, python)) is not None:
        with contextlib.suppress(OSError):  # its last use, for the limit
            os.utime(found.path / _COMPLETE)
        return found
    target = folder(version, python)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=target.parent) as tmp:
        if wheels is not None:
            files = index.wheels_for(wheels, version, python)
        elif python is not None or index.needs_numpy_1(version):
            files = _download_for(version, index.python_version(python), Path(tmp))
        else:
            files = _download(version, Path(tmp))
        _install(version, files, target)
    return Release(version, target, python)


def _install(version: str, files: Sequence[Path], target: Path) -> None:
    """Unpack ``files`` (wheels) into ``target``, whole or not at all, making room first."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    need = _unpacked_size(tuple(files))
    _make_room(need)
    _check_room(files[0], need, target.parent)
    try:
        for wheel in files:
            _unzip(wheel, partial)
        (partial / _COMPLETE).write_text(f"{version}\n{need}\n", "utf-8")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def compiler_folder(dist: str, version: str) -> Path:
    return root() / "releases" / f"{dist}-{version}"


def compiler(version: str, wheel: str, wheels: Path | None = None) -> CompilerRelease:
    """libtpu ``version`` unpacked in the cache, from its ``wheel`` (a file name) in
    ``wheels`` if given, else downloaded through pip. Raises ``BugkitError`` saying why it
    cannot be had, or when the wheel holds no ``libtpu.so``."""
    target = compiler_folder(libtpu.DIST, version)
    if not (target / _COMPLETE).is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=target.parent) as tmp:
            if wheels is not None:
                files: tuple[Path, ...] = (wheels / wheel,)
            else:
                tag = libtpu.wheel_python(wheel)
                at = ["--python-version", tag] if tag else []
                files = (_pip_download(f"{libtpu.DIST}=={version}", Path(tmp), at),)
            _install(version, files, target)
    else:
        with contextlib.suppress(OSError):  # its last use, for the limit
            os.utime(target / _COMPLETE)
    library = target / libtpu.DIST / libtpu.LIBRARY
    if not library.is_file():
        shutil.rmtree(target, ignore_errors=True)  # nothing a replay could load
        raise BugkitError(f"{wheel} holds no {libtpu.DIST}/{libtpu.LIBRARY}")
    return CompilerRelease(libtpu.DIST, version, library)


def _download(version: str, into: Path) -> tuple[Path, ...]:
    """The jaxlib and jax wheels of ``version``, through pip (the user's index and proxy)."""
    return _pip_download(f"jaxlib=={version}", into / "jaxlib"), _jax_wheel(version, into)


def _download_for(version: str, python_version: str, into: Path) -> tuple[Path, ...]:
    """The wheels of ``version`` for another Python, or with numpy 1 (``needs_numpy_1``):
    jax and jaxlib, and what they need (numpy, ml_dtypes, scipy, ...), as pip resolves them
    for that Python."""
    at = ["--python-version", python_version]
    jax = _jax_wheel(version, into, at)
    needs = [r for r in index.requirements(jax) if not r.lower().startswith("jaxlib")]
    if index.needs_numpy_1(version):
        needs.append("numpy<2")
    _pip_download(f"jaxlib=={version}", into / "deps", [*at, *needs], deps=True)
    return (jax, *sorted((into / "deps").glob("*.whl")))


def _jax_wheel(version: str, into: Path, extra: Sequence[str] = ()) -> Path:
    for jax_version in index.jax_versions(version):
        with contextlib.suppress(BugkitError):
            return _pip_download(f"jax=={jax_version}", into / f"jax-{jax_version}", extra)
    raise BugkitError(f"pip found no jax wheel to go with jaxlib {version}")


def _pip_download(
    requirement: str, into: Path, extra: Sequence[str] = (), *, deps: bool = False
) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
    argv += [] if deps else ["--no-deps"]
    argv += ["--dest", str(into), requirement, *extra]
    done = proc.run_captured(argv, timeout=DOWNLOAD_TIMEOUT)
    found = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not found:
        lines = [line.strip() for line in done.output.splitlines() if line.strip()]
        why = next((line for line in lines if line.startswith("ERROR")), lines[-1:] or [""])
        raise BugkitError(f"pip could not download {requirement}: {str(why) or 'no wheel'}")
    return found[0]


def _unpacked_size(wheels: tuple[Path, ...]) -> int:
    need = 0
    for wheel in wheels:
        with _open(wheel) as z:
            need += sum(info.file_size for info in z.infolist())
    return need


def _make_room(need: int) -> None:
    """Remove the releases used longest ago while the cache and ``need`` pass the limit."""
    cap = limit()
    held = entries()
    total = sum(e.size for e in held)
    for entry in held:
        if total + need <= cap:
            break
        shutil.rmtree(entry.path, ignore_errors=True)
        total -= entry.size


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _check_room(wheel: Path, need: int, where: Path) -> None:
    free = shutil.disk_usage(where).free
    if need + _HEADROOM > free:
        raise BugkitError(
            f"unpacking {wheel.name} needs {need / 1e6:,.0f} MB; {where} has "
            f"{free / 1e6:,.0f} MB free: free some, or set {CACHE_ENV} to a folder elsewhere"
        )


def _open(wheel: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise BugkitError(f"{wheel.name} is not a readable wheel: {e}") from None


def _unzip(wheel: Path, into: Path) -> None:
    """Extract ``wheel`` into ``into``; a member named outside it refuses the whole wheel."""
    with _open(wheel) as z:
        for info in z.infolist():
            name = PurePosixPath(info.filename)
            if name.is_absolute() or ".." in name.parts or "\\" in info.filename:
                raise BugkitError(f"{wheel.name}: member {info.filename!r} leaves its folder")
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
                raise BugkitError(f"{wheel.name}: member {info.filename!r} is not a plain file")
        try:
            z.extractall(into)
        except (OSError, zipfile.BadZipFile) as e:
            raise BugkitError(f"cannot unpack {wheel.name} into {into}: {e}") from None


def remove(version: str) -> bool:
    """Remove ``version`` from the cache; whether it was there."""
    path = folder(version)
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True
