"""The user's defaults, from ``config.toml`` in platformdirs' user config dir.

Example, for people who always file on GitHub (which does not accept .7z)::

    # ~/.config/xla-bugkit/config.toml
    format = "zip"
    max_size = "25MB"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from xla_bugkit.errors import BugkitError

FORMATS = ("7z", "zip", "tar.gz")
_KEYS = {"format", "max_size"}


@dataclass(frozen=True)
class Config:
    format: str = "7z"
    max_size: str = "25MB"


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
    return Config(format=fmt, max_size=str(data.get("max_size", Config.max_size)))
