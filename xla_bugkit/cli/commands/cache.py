"""``xla-bugkit cache``: the jaxlib (and libtpu) releases that ``bisect`` and ``verify
--jaxlib`` keep unpacked (``releases.cache``), and ``--clear`` to remove them."""

from __future__ import annotations

import argparse
import time

from xla_bugkit.errors import ExitCode
from xla_bugkit.ui import Ui

HELP = "the jaxlib (and libtpu) releases bisect keeps unpacked: list them, or --clear"
DESCRIPTION = (
    "List the jaxlib releases that bisect and verify --jaxlib keep unpacked, with their size "
    "and last use, or remove them."
)
EPILOG = """\
examples:
  xla-bugkit cache            the releases kept, their size and last use
  xla-bugkit cache --clear    remove them all

bisect and verify --jaxlib unpack each release they try once and keep it (about 350 MB).
When a new one would take the cache past its limit (4 GB, or $XLA_BUGKIT_CACHE_LIMIT such
as 10GB), the releases used longest ago are removed first. $XLA_BUGKIT_CACHE moves it.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clear", action="store_true", help="remove every release from the cache")


def run(args: argparse.Namespace, ui: Ui) -> int:
    from xla_bugkit.releases import cache, index

    where = cache.root() / "releases"
    if args.clear:
        gone = cache.clear()
        size = sum(e.size for e in gone) / 1e6
        ui.say(f"removed {_releases(len(gone))} ({size:,.0f} MB) from {where}")
        return ExitCode.OK
    held = cache.entries()
    print(f"{where}: limit {cache.limit() / 1e9:g} GB (${cache.LIMIT_ENV})")
    ours = index.python_tag()
    for e in reversed(held):  # the newest use first
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.used))
        other = f"  for {e.python_tag}" if e.python_tag not in (ours, "") else ""
        print(f"  {e.dist} {e.version:<10} {e.size / 1e6:>7,.0f} MB  last used {used}{other}")
    print(f"{_releases(len(held))}, {sum(e.size for e in held) / 1e6:,.0f} MB")
    return ExitCode.OK


def _releases(n: int) -> str:
    return f"{n} release{'' if n == 1 else 's'}"
