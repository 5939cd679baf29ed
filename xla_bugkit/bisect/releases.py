"""Which jaxlib releases there are to replay under: from the package index, through pip (so
the user's pip configuration, index and proxy apply), or from a folder of wheels.

A release is tried only where this interpreter can load its wheel (its CPython tag and this
machine's architecture); the others are listed with the reason, never silently left out.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import proc
from xla_bugkit.errors import BugkitError
from xla_bugkit.frameworks import is_release_number

# The oldest release whose private APIs the replay worker drives (``_jaxlib.MIN_JAXLIB``);
# older ones cannot read the module it is given either ("Instruction with id > INT_MAX").
OLDEST = (0, 6)
PIP_TIMEOUT = 120.0
# A wheel's name: jaxlib-0.8.1-cp311-cp311-manylinux_2_27_x86_64.whl
_WHEEL = re.compile(
    r"^(?P<name>jaxlib|jax)-(?P<version>\d+(?:\.\d+)+)-(?P<python>[^-]+)-[^-]+-(?P<arch>[^-]+)\.whl$"
)


def key(version: str) -> tuple[int, ...]:
    """A version's sort key: "0.9.0.1" → (0, 9, 0, 1)."""
    return tuple(int(part) for part in version.split("."))


def python_tag() -> str:
    """This interpreter's wheel tag: "cp311"."""
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


@dataclass(frozen=True)
class Releases:
    """The releases a bisect may try, oldest first, and those it may not, with why."""

    tried: tuple[str, ...]
    untried: tuple[tuple[str, str], ...] = ()  # (version, why)
    source: str = "the package index"  # where they were listed: the index, or a folder

    def between(self, low: str | None, high: str | None) -> Releases:
        """Only those from ``low`` to ``high`` (both included; None: no bound)."""

        def inside(v: str) -> bool:
            return (low is None or key(v) >= key(low)) and (high is None or key(v) <= key(high))

        return Releases(
            tuple(v for v in self.tried if inside(v)),
            tuple((v, why) for v, why in self.untried if inside(v)),
            self.source,
        )

    def with_installed(self, version: str) -> Releases:
        """With the release installed here, which needs no wheel ("not installed": as is)."""
        if not is_release_number(version) or version in self.tried or key(version) < OLDEST:
            return self
        tried = tuple(sorted({*self.tried, version}, key=key))
        untried = tuple(u for u in self.untried if u[0] != version)
        return Releases(tried, untried, self.source)


def _sorted(versions: set[str]) -> list[str]:
    return sorted((v for v in versions if is_release_number(v)), key=key)


def _split(versions: set[str], elsewhere: set[str], source: str) -> Releases:
    """``versions`` this interpreter can load; ``elsewhere``: those only other Pythons can."""
    tried, untried = [], []
    for v in _sorted(versions):
        if key(v) < OLDEST:
            oldest = ".".join(map(str, OLDEST))
            untried.append((v, f"older than {oldest}, the oldest xla-bugkit's replay drives"))
        else:
            tried.append(v)
    here = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    for v in _sorted(elsewhere - versions):
        untried.append((v, f"no wheel for {here} (it needs another Python)"))
    return Releases(tuple(tried), tuple(sorted(untried, key=lambda u: key(u[0]))), source)


def from_index() -> Releases:
    """The releases on the package index pip is configured with."""
    here = _index_versions(None)
    # Newer releases often need a newer Python: they are named, as not tried here.
    newer = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    try:
        elsewhere = _index_versions(newer)
    except BugkitError:
        elsewhere = set()
    return _split(here, elsewhere, "the package index")


def _index_versions(python_version: str | None) -> set[str]:
    argv = [sys.executable, "-m", "pip", "index", "versions", "jaxlib", "--json"]
    if python_version is not None:
        argv += ["--python-version", python_version, "--only-binary=:all:"]
    done = proc.run_captured(argv, timeout=PIP_TIMEOUT)
    text = done.output
    start = text.find("{")
    if done.returncode == 0 and start >= 0:
        try:
            data = json.loads(text[start : text.rindex("}") + 1])
            return {str(v) for v in data.get("versions", [])}
        except (ValueError, AttributeError):
            pass
    last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
    raise BugkitError(
        f"cannot list jaxlib releases through pip ({last[0].strip()}); "
        "download the wheels (pip download --no-deps jaxlib==V jax==V) and give --wheels DIR"
    )


def from_folder(folder: Path) -> Releases:
    """The releases whose jaxlib and jax wheels both lie in ``folder``."""
    if not folder.is_dir():
        raise BugkitError(f"--wheels {folder}: not a folder")
    jaxlib: dict[str, str] = {}  # version: python tag
    jax: set[str] = set()
    for path in folder.iterdir():
        found = _WHEEL.match(path.name)
        if found is None or not path.is_file():
            continue
        if found["name"] == "jax":
            jax.add(found["version"])
        elif found["arch"].endswith(platform.machine()) and found["python"] == python_tag():
            jaxlib[found["version"]] = found["python"]
        else:
            jaxlib.setdefault(found["version"], found["python"])
    here = {v for v, tag in jaxlib.items() if tag == python_tag() and v in jax}
    releases = _split(here, set(), f"{folder}")
    untried = list(releases.untried)
    for v in _sorted(set(jaxlib) - here):
        why = "no jax wheel beside it" if jaxlib[v] == python_tag() else f"a {jaxlib[v]} wheel"
        untried.append((v, why))
    return Releases(releases.tried, tuple(sorted(untried, key=lambda u: key(u[0]))), str(folder))


def wheels_for(folder: Path, version: str) -> tuple[Path, Path]:
    """The jaxlib and jax wheels of ``version`` in ``folder``."""
    jaxlib = jax = None
    for path in sorted(folder.iterdir()):
        found = _WHEEL.match(path.name)
        if found is None or found["version"] != version:
            continue
        if found["name"] == "jax":
            jax = path
        elif found["python"] == python_tag() and found["arch"].endswith(platform.machine()):
            jaxlib = path
    if jaxlib is None or jax is None:
        raise BugkitError(f"{folder} lacks the jaxlib or jax wheel of {version}")
    return jaxlib, jax
