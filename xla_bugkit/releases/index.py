"""Which jaxlib releases there are to replay under: from the package index, through pip (so
the user's pip configuration, index and proxy apply), or from a folder of wheels.

A release is tried only where this interpreter can load its wheel (its CPython tag and this
machine's architecture); the others are listed with the reason, never silently left out.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from xla_bugkit import proc
from xla_bugkit.errors import BugkitError, ProcessError
from xla_bugkit.frameworks import is_release_number

# The oldest release whose private APIs the replay worker drives (``jaxlib_adapter.MIN_JAXLIB``);
# before it, the index has no jax wheel for Python 3.11 (0.4.13's is a source archive).
# Releases before 0.6 cannot read a recent proto ("Instruction with id > INT_MAX") and are
# given the module as metadata-free text (``carrier``).
OLDEST = (0, 4, 18)
# jax before 0.4.30 was written for numpy 1 (it calls np.trapz, gone from numpy 2.4), and
# the ml_dtypes built for numpy 2 do not load under numpy 1: such a release comes with
# numpy 1 and what goes with it, as pip resolves them (``needs_numpy_1``).
NUMPY_2_FROM = (0, 4, 30)


def needs_numpy_1(version: str) -> bool:
    """Whether ``version``'s jax runs only with numpy 1, and its dependencies with it."""
    return key(version) < NUMPY_2_FROM


PIP_TIMEOUT = 120.0
# What `pip index versions` prints, from pip 21.2 on: "Available versions: 0.10.2, 0.10.1, ..."
_AVAILABLE = re.compile(r"^Available versions: (?P<versions>.*)$", re.MULTILINE)
# A wheel's name: jaxlib-0.8.1-cp311-cp311-manylinux_2_27_x86_64.whl
_WHEEL = re.compile(
    r"^(?P<name>jaxlib|jax)-(?P<version>\d+(?:\.\d+)+)-(?P<python>[^-]+)-[^-]+-(?P<arch>[^-]+)\.whl$"
)


def key(version: str) -> tuple[int, ...]:
    """A version's sort key: "0.9.0.1" → (0, 9, 0, 1)."""
    return tuple(int(part) for part in version.split("."))


def python_tag(python: str | None = None) -> str:
    """An interpreter's wheel tag: "cp311" (``python`` None: this one's)."""
    return "cp" + python_version(python).replace(".", "")


def python_version(python: str | None = None) -> str:
    """An interpreter's version, "3.12" (``python`` None: this one's). Raises
    ``BugkitError`` when ``python`` does not run."""
    if python is None:
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    return _version_of(python)


@functools.cache
def _version_of(python: str) -> str:
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        done = proc.run_captured([python, "-I", "-c", probe], timeout=PIP_TIMEOUT)
    except ProcessError as e:
        raise BugkitError(f"--python {python}: {e}") from None
    found = re.fullmatch(r"3\.\d+", done.output.strip())
    if done.returncode != 0 or found is None:
        raise BugkitError(f"--python {python}: not a Python 3 interpreter")
    return found.group(0)


@dataclass(frozen=True)
class Releases:
    """The releases a bisect may try, oldest first, and those it may not, with why."""

    tried: tuple[str, ...]
    untried: tuple[tuple[str, str], ...] = ()  # (version, why)
    source: str = "the package index"  # where they were listed: the index, or a folder
    # The releases tried under another interpreter (``--python``): version -> interpreter.
    elsewhere: Mapping[str, str] = field(default_factory=dict)

    def between(self, low: str | None, high: str | None) -> Releases:
        """Only those from ``low`` to ``high`` (both included; None: no bound)."""

        def inside(v: str) -> bool:
            return (low is None or key(v) >= key(low)) and (high is None or key(v) <= key(high))

        return Releases(
            tuple(v for v in self.tried if inside(v)),
            tuple((v, why) for v, why in self.untried if inside(v)),
            self.source,
            {v: p for v, p in self.elsewhere.items() if inside(v)},
        )

    def with_installed(self, version: str) -> Releases:
        """With the release installed here, which needs no wheel ("not installed": as is)."""
        if not is_release_number(version) or version in self.tried or key(version) < OLDEST:
            return self
        tried = tuple(sorted({*self.tried, version}, key=key))
        untried = tuple(u for u in self.untried if u[0] != version)
        elsewhere = {v: p for v, p in self.elsewhere.items() if v != version}
        return Releases(tried, untried, self.source, elsewhere)


def _sorted(versions: set[str]) -> list[str]:
    return sorted((v for v in versions if is_release_number(v)), key=key)


def _split(
    versions: set[str], elsewhere: set[str], source: str, python: str | None = None
) -> Releases:
    """``versions`` this interpreter can load; ``elsewhere``: those only another Python
    can, tried under ``python`` when it is given (``--python``), else named as not tried."""
    tried, untried = [], []
    under = set(elsewhere - versions) if python is not None else set()
    for v in _sorted(versions | under):
        if key(v) < OLDEST:
            oldest = ".".join(map(str, OLDEST))
            untried.append((v, f"older than {oldest}, the oldest xla-bugkit's replay drives"))
        else:
            tried.append(v)
    if python is None:
        here = f"Python {python_version()}"
        for v in _sorted(elsewhere - versions):
            why = f"no wheel for {here}: give --python with a newer one to try it"
            untried.append((v, why))
    return Releases(
        tuple(tried),
        tuple(sorted(untried, key=lambda u: key(u[0]))),
        source,
        {v: python for v in tried if v in under} if python is not None else {},
    )


def from_index(python: str | None = None) -> Releases:
    """The releases on the package index pip is configured with; with ``python`` (another
    interpreter), also those only it can load, to be tried under it."""
    here = _index_versions(None)
    if python is not None:
        return _split(here, _index_versions(python_version(python)), "the package index", python)
    # Newer releases often need a newer Python: they are named, as not tried here.
    newer = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    try:
        elsewhere = _index_versions(newer)
    except BugkitError:
        elsewhere = set()
    return _split(here, elsewhere, "the package index")


def _index_versions(python_version: str | None, pip_python: str = sys.executable) -> set[str]:
    """The jaxlib releases ``pip index versions`` lists, read from the text every pip since
    21.2 prints (``--json`` needs a pip from 2024); through ``pip_python``'s own pip, so that
    the user's pip configuration (index URL, extra index, find-links, proxy) holds."""
    argv = [pip_python, "-m", "pip", "index", "versions", "jaxlib"]
    if python_version is not None:
        argv += ["--python-version", python_version, "--only-binary=:all:"]
    done = proc.run_captured(argv, timeout=PIP_TIMEOUT)
    found = _AVAILABLE.search(done.output)
    if done.returncode == 0 and found is not None:
        listed = (v.strip() for v in found["versions"].split(","))
        return {v for v in listed if re.fullmatch(r"\d+(?:\.\d+)+", v)}
    lines = [line for line in done.output.splitlines() if line.strip()]
    said = [line for line in lines if "experimental command" not in line][-1:] or ["no output"]
    raise BugkitError(
        f"cannot list jaxlib releases through pip ({said[0].strip()}); "
        "download the wheels (pip download --no-deps jaxlib==V jax==V) and give --wheels DIR"
    )


def from_folder(folder: Path, python: str | None = None) -> Releases:
    """The releases whose jaxlib and jax wheels both lie in ``folder``; with ``python``
    (another interpreter), also those built only for it, to be tried under it (their
    dependencies' wheels must lie there too)."""
    if not folder.is_dir():
        raise BugkitError(f"--wheels {folder}: not a folder")
    tags: dict[str, set[str]] = {}  # jaxlib version: the python tags of its wheels here
    jax: set[str] = set()
    for path in folder.iterdir():
        found = _WHEEL.match(path.name)
        if found is None or not path.is_file():
            continue
        if found["name"] == "jax":
            jax.add(found["version"])
        elif found["arch"].endswith(platform.machine()):
            tags.setdefault(found["version"], set()).add(found["python"])
        else:
            tags.setdefault(found["version"], set())

    def has_jax(v: str) -> bool:
        return bool(jax.intersection(jax_versions(v)))

    ours = python_tag()
    theirs = python_tag(python) if python is not None else None
    here = {v for v, t in tags.items() if ours in t and has_jax(v)}
    there = {v for v, t in tags.items() if theirs in t and has_jax(v)} if theirs else set()
    found_releases = _split(here, there, f"{folder}", python)
    untried = list(found_releases.untried)
    for v in _sorted(set(tags) - here - there):
        names = sorted(tags[v]) or [f"no {platform.machine()}"]
        why = "no jax wheel beside it" if ours in tags[v] else f"a {', '.join(names)} wheel"
        if tags[v] and ours not in tags[v] and python is None:
            why += ": give --python with that Python to try it"
        untried.append((v, why))
    return replace(found_releases, untried=tuple(sorted(untried, key=lambda u: key(u[0]))))


def jax_versions(version: str) -> tuple[str, ...]:
    """The jax releases that go with a jaxlib release: its own number, and for a
    jaxlib-only patch release (0.9.0.1) the jax of its first three numbers."""
    return tuple(dict.fromkeys([version, ".".join(version.split(".")[:3])]))


def wheels_for(folder: Path, version: str, python: str | None = None) -> tuple[Path, ...]:
    """The jaxlib and jax wheels of ``version`` in ``folder``; for another interpreter
    (``python``), or a release that needs numpy 1, with the newest wheel of each other
    distribution there it can load (the numpy, below 2 for the latter, ml_dtypes and scipy
    that release needs, built for it)."""
    tag = python_tag(python)
    jaxlib = None
    jax: dict[str, Path] = {}
    others: dict[str, tuple[tuple[int, ...], Path]] = {}
    for path in sorted(folder.iterdir()):
        found = _WHEEL.match(path.name)
        if found is not None:
            if found["name"] == "jax":
                jax[found["version"]] = path
            elif found["version"] == version and found["python"] == tag:
                jaxlib = path if found["arch"].endswith(platform.machine()) else jaxlib
            continue
        other = _loadable(path.name, tag)
        if other is None or (python is None and not needs_numpy_1(version)):
            continue
        if needs_numpy_1(version) and other[0] == "numpy" and other[1] >= (2,):
            continue
        if other[1] > others.get(other[0], ((),))[0]:
            others[other[0]] = (other[1], path)
    pair = next((jax[v] for v in jax_versions(version) if v in jax), None)
    if jaxlib is None or pair is None:
        raise BugkitError(f"{folder} lacks the jaxlib ({tag}) or jax wheel of {version}")
    return (jaxlib, pair, *(path for _, path in sorted(others.values())))


# Any wheel's name: distribution-version(-build)-python-abi-platform.whl
_ANY_WHEEL = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)"
    r"-(?P<arch>[^-]+)\.whl$"
)


def _loadable(name: str, tag: str) -> tuple[str, tuple[int, ...]] | None:
    """(distribution, version) of a wheel an interpreter of ``tag`` ("cp312") can load
    on this machine; None for any other file."""
    found = _ANY_WHEEL.match(name)
    if found is None:
        return None
    arch = found["arch"]
    if arch != "any" and not arch.endswith(platform.machine()):
        return None
    pythons = found["python"].split(".")
    minor = int(tag[3:])
    stable = found["abi"] == "abi3" and any(
        p.startswith("cp3") and p[3:].isdigit() and int(p[3:]) <= minor for p in pythons
    )
    if not (tag in pythons or stable or (found["abi"] == "none" and "py3" in pythons)):
        return None
    numbers = tuple(int(n) for n in re.findall(r"\d+", found["version"]))
    return found["name"].lower().replace("_", "-"), numbers


def requirements(wheel: Path) -> list[str]:
    """What a wheel requires (its METADATA's Requires-Dist), extras and markers left out."""
    try:
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(meta).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, StopIteration):
        raise BugkitError(f"{wheel.name}: no readable METADATA") from None
    found = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            found.append(line.split(":", 1)[1].split(";", 1)[0].strip().replace(" ", ""))
    return found
