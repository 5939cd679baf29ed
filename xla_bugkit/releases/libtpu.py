"""Which libtpu releases there are to replay a TPU module under: from PyPI's JSON for
``libtpu``, or from a folder of ``libtpu-*.whl`` wheels.

jaxlib loads libtpu's ``libtpu.so`` through the PJRT C API (jax's ``TPU_LIBRARY_PATH``), not
as a Python module: a wheel built for another CPython serves too, ours preferred. A release
is listed as not tried when it has no wheel for this machine's architecture, or was yanked;
never silently left out. Which libtpu a jax release was made with is its ``tpu`` extra's pin
(``paired``): one far from it may not load under this jaxlib, which its probe says.
"""

from __future__ import annotations

import json
import platform
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from xla_bugkit.errors import BugkitError
from xla_bugkit.releases.index import key, python_tag

DIST = "libtpu"
LIBRARY = "libtpu.so"  # in the wheel's ``libtpu/`` folder
PYPI_URL = "https://pypi.org/pypi/libtpu/json"
INDEX_TIMEOUT = 60.0
# libtpu-0.0.42.1-cp311-cp311-manylinux_2_31_x86_64.whl; older: libtpu-0.0.9-py3-none-...
_WHEEL = re.compile(
    r"^libtpu-(?P<version>\d+(?:\.\d+)+)-(?P<python>[^-]+)-[^-]+-(?P<arch>[^-]+)\.whl$"
)
OFFLINE_HINT = "download the wheels (pip download --no-deps libtpu==V) and give --wheels DIR"


@dataclass(frozen=True)
class Listing:
    """The libtpu releases to try, oldest first, each with the wheel to unpack (its file
    name), and those not to, with why."""

    wheels: Mapping[str, str]  # version -> wheel file name, for the releases tried
    untried: tuple[tuple[str, str], ...] = ()  # (version, why)
    source: str = "PyPI"

    @property
    def tried(self) -> tuple[str, ...]:
        return tuple(sorted(self.wheels, key=key))

    def between(self, low: str | None, high: str | None) -> Listing:
        """Only those from ``low`` to ``high`` (both included; None: no bound)."""

        def inside(v: str) -> bool:
            return (low is None or key(v) >= key(low)) and (high is None or key(v) <= key(high))

        return Listing(
            {v: w for v, w in self.wheels.items() if inside(v)},
            tuple(u for u in self.untried if inside(u[0])),
            self.source,
        )


def _choose(names: list[str]) -> tuple[str | None, str]:
    """The wheel to unpack of one release's files for this machine's architecture (ours
    first, then a pure "py3" one, then any other CPython's), or None and why none serves."""
    ours, arch = python_tag(), platform.machine()
    usable = [n for n in names if (m := _WHEEL.match(n)) and m["arch"].endswith(arch)]
    if not usable:
        return None, f"no {arch} wheel"
    usable.sort(key=lambda n: (_tag(n) != ours, _tag(n) != "py3", _tag(n)))
    return usable[0], ""


def wheel_python(name: str) -> str | None:
    """The Python version pip is asked to fetch the wheel ``name`` for ("3.12"); None for a
    pure "py3" one or this interpreter's, which pip fetches as it is."""
    tag = _tag(name)
    if tag == python_tag() or not re.fullmatch(r"cp3\d+", tag):
        return None
    return f"3.{tag[3:]}"


def _tag(name: str) -> str:
    found = _WHEEL.match(name)
    return found["python"] if found is not None else ""


def parse_pypi(data: Mapping[str, Any]) -> Listing:
    """The releases PyPI's JSON for libtpu (``/pypi/libtpu/json``) lists."""
    releases = data.get("releases")
    if not isinstance(releases, Mapping):
        raise BugkitError("PyPI's answer for libtpu lists no releases")
    wheels: dict[str, str] = {}
    untried: list[tuple[str, str]] = []
    for version, files in releases.items():
        if not re.fullmatch(r"\d+(?:\.\d+)+", version) or not isinstance(files, list):
            continue  # pre-releases and what is not a release number
        live = [f for f in files if isinstance(f, Mapping) and not f.get("yanked")]
        if files and not live:
            untried.append((version, "yanked"))
            continue
        chosen, why = _choose([str(f.get("filename", "")) for f in live])
        if chosen is None:
            untried.append((version, why))
        else:
            wheels[version] = chosen
    return Listing(wheels, tuple(sorted(untried, key=lambda u: key(u[0]))), "PyPI")


def from_pypi(url: str = PYPI_URL) -> Listing:
    """The libtpu releases on PyPI, read from its JSON API (the environment's proxy
    applies). Raises ``BugkitError`` saying what to pass instead where it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=INDEX_TIMEOUT) as answer:
            data = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = getattr(e, "reason", None) or e
        raise BugkitError(
            f"cannot read libtpu's releases from {url} ({why}): {OFFLINE_HINT}"
        ) from None
    return parse_pypi(data)


def from_folder(folder: Path) -> Listing:
    """The libtpu releases whose wheels lie in ``folder``."""
    if not folder.is_dir():
        raise BugkitError(f"--wheels {folder}: not a folder")
    names: dict[str, list[str]] = {}
    for path in folder.iterdir():
        found = _WHEEL.match(path.name)
        if found is not None and path.is_file():
            names.setdefault(found["version"], []).append(path.name)
    wheels: dict[str, str] = {}
    untried: list[tuple[str, str]] = []
    for version, files in names.items():
        chosen, why = _choose(files)
        if chosen is None:
            untried.append((version, why))
        else:
            wheels[version] = chosen
    return Listing(wheels, tuple(sorted(untried, key=lambda u: key(u[0]))), f"{folder}")


def paired(jax_requires: list[str] | None = None) -> str | None:
    """The libtpu the installed jax was released with, as its ``tpu`` extra pins it
    ("0.0.42.*"); None where it pins none. ``jax_requires``: its Requires-Dist lines
    (default: the installed jax's)."""
    if jax_requires is None:
        try:
            jax_requires = metadata.requires("jax") or []
        except metadata.PackageNotFoundError:
            return None
    for line in jax_requires:
        found = re.match(r"^libtpu\s*==\s*([\w.*]+)\s*;.*extra\s*==\s*['\"]tpu['\"]", line)
        if found is not None:
            return found[1]
    return None
