"""The benchmark inputs: a real dump tree, and a large tree made by multiplying it.

Both are cached under the work folder with a small JSON marker next to them (not inside:
the marker would show up in the dump index as a stray file).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from _common import Config, checked, dump_env, fresh_dir, program_cmd, run_child, tree_bytes

_MODULE = re.compile(r"^(?P<ts>\d+\.)?module_(?P<id>\d+)\.(?P<rest>.+)$")


def _cached(marker: Path, want: dict[str, int]) -> bool:
    try:
        return all(json.loads(marker.read_text())[k] == v for k, v in want.items())
    except (OSError, ValueError, KeyError):
        return False


def real_dump(cfg: Config) -> Path:
    """The dump tree of one run of the generated program, made once and kept."""
    root, marker = cfg.work / "real", cfg.work / "real.json"
    if _cached(marker, {"count": cfg.count}):
        return root
    fresh_dir(root)
    done, took = run_child(program_cmd(cfg), env=dump_env(root))
    checked(done)
    marker.write_text(json.dumps({"count": cfg.count, "bytes": tree_bytes(root), "s": took}))
    return root


def large_tree(cfg: Config, real: Path) -> Path:
    """Copies of ``real`` with renumbered module ids until the tree holds ``large_bytes``.

    Real copies, not links: a search must read every copy's pages, as on a real large dump.
    """
    root, marker = cfg.work / "large", cfg.work / "large.json"
    source = tree_bytes(real)
    copies = max(1, -(-cfg.large_bytes // source))  # ceiling division
    if _cached(marker, {"copies": copies, "source_bytes": source}):
        return root
    fresh_dir(root)
    entries = sorted(real.iterdir())
    stride = 10 ** len(str(max(_ids(entries), default=0)))
    for k in range(copies):
        for entry in entries:
            _copy_entry(entry, root, k, stride)
    marker.write_text(
        json.dumps({"copies": copies, "source_bytes": source, "bytes": tree_bytes(root)})
    )
    return root


def _ids(entries: list[Path]) -> list[int]:
    return [int(m["id"]) for e in entries if (m := _MODULE.match(e.name))]


def _copy_entry(entry: Path, root: Path, k: int, stride: int) -> None:
    m = _MODULE.match(entry.name)
    if m is None:  # a file of no module: one copy is enough
        if k == 0:
            _copy(entry, root / entry.name)
        return
    new_id = k * stride + int(m["id"])
    # Same name, new id: each copy is a distinct module, as in a longer run of the program.
    _copy(entry, root / f"{m['ts'] or ''}module_{new_id:04d}.{m['rest']}")


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():  # a per-module PJRT folder
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
