"""The user's defaults, from ``config.toml`` in platformdirs' user config dir.

Example, for people who always file on GitHub (which does not accept .7z)::

    # ~/.config/xla-bugkit/config.toml
    format = "zip"
    max_size = "25MB"
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from xla_bugkit.errors import BugkitError

# The built-in defaults; everything else that takes a size or a timeout starts from these.
MAX_SIZE = 25 * 1000 * 1000  # bytes: GitHub's attachment limit
REPLAY_TIMEOUT = 300.0  # seconds one module's replay may take
MAX_DUMP_SIZE = 2 * 1000**3  # bytes of real inputs a run may keep on disk (--max-dump-size)
SEARCH_BUDGET = 120.0  # seconds collect may spend replaying modules to find a wrong value
FORMATS = ("7z", "zip", "tar.gz")  # the archive formats a bundle can have
DEFAULT_FORMAT = "7z"

_KEYS = {"format", "max_size"}


@dataclass(frozen=True)
class Config:
    format: str = DEFAULT_FORMAT
    max_size: str = f"{MAX_SIZE // 1000**2}MB"


def config_path() -> Path:
    return Path(platformdirs.user_config_dir("xla-bugkit")) / "config.toml"


def load(path: Path | None = None) -> Config:
    """The defaults in ``path`` (default: the user's config file); built-in ones if absent."""
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BugkitError(f"cannot read {path}: {e}") from None
    if unknown := sorted(set(data) - _KEYS):
        raise BugkitError(f"{path}: unknown setting {unknown[0]!r} (known: format, max_size)")
    fmt = data.get("format", Config.format)
    if fmt not in FORMATS:
        raise BugkitError(f"{path}: format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    max_size = str(data.get("max_size", Config.max_size))
    try:
        parse_size(max_size)
    except ValueError as e:
        raise BugkitError(f"{path}: max_size: {e}") from None
    return Config(format=fmt, max_size=max_size)


_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?:(?P<unit>[kmg])b?|(?P<bytes>b))$")
_SIZE_UNITS = {"k": 10**3, "m": 10**6, "g": 10**9}
SIZE_HOWTO = "a size takes a unit: 25M, 10k, 1.5G; bytes only with B, as in 800B"


def parse_size(text: str) -> int:
    """Bytes in "25M", "25MB", "10k", "1.5G" (powers of 1000) or "800B"; ValueError for
    anything else. A bare number is refused: "10" meant as 10 MB would be 10 bytes."""
    found = _SIZE.match(text.strip().lower())
    if found is None:
        if re.fullmatch(r"\d+(\.\d+)?", n := text.strip()):
            raise ValueError(
                f"{n!r} has no unit: {n}M for megabytes, {n}k for kilobytes, {n}B for bytes"
            )
        raise ValueError(f"not a size: {text!r} ({SIZE_HOWTO})")
    factor = 1 if found.group("bytes") else _SIZE_UNITS[found.group("unit")]
    return int(float(found.group("n")) * factor)


def size_text(n: int) -> str:
    """``n`` bytes as a person reads them, in the units ``parse_size`` takes: "800 B",
    "15.6 kB", "2.50 MB", "1.50 GB"."""
    if n < 1000:
        return f"{n} B"
    if n < 10**6:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.2f} MB" if n < 10**9 else f"{n / 1e9:.2f} GB"


_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[smh]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """``"90"``, ``"90s"``, ``"2m"``, ``"1h"`` as seconds; None for anything else, zero and
    negative durations included: the one grammar of every duration and timeout."""
    found = _DURATION.match(text.strip().lower())
    if found is None or float(found.group("n")) <= 0:
        return None
    return float(found.group("n")) * _UNITS[found.group("unit")]


def parse_budget(text: str) -> float:
    """A shrink's ``--budget`` (``"10m"``, ``"90s"``, ``"1h"`` or plain seconds) as seconds,
    read alike by ``shrink`` and ``collect --shrink``."""
    seconds = parse_duration(text)
    if seconds is None:
        raise BugkitError(f"--budget {text!r}: give a duration such as 10m, 90s or 1h")
    return seconds
