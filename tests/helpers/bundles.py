"""Small bundles built by hand, shaped as ``build`` writes them: an honest one (``stage``,
``bundle_members``) and each way one can lie (``HOSTILE``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.hostile import DEEP, SUFFIX, write_raw
from xla_bugkit.bundle.manifest import EDIT_SLACK, SCHEMA_VERSION, FileEntry, file_entries
from xla_bugkit.bundle.members import MANIFEST

HLO = "modules/module_0000.jit_f/module_0000.jit_f.before_optimizations.hlo.pb"
ISSUE = "ISSUE.md"


HLO_DATA = b"\x0a\x05jit_f"
ISSUE_DATA = b"# XLA CPU compile crash\n"


def stage(root: Path) -> dict[str, Any]:
    """A small bundle's staging folder and its manifest, shaped as ``build`` writes them."""
    (root / HLO).parent.mkdir(parents=True)
    (root / HLO).write_bytes(HLO_DATA)
    (root / ISSUE).write_bytes(ISSUE_DATA)
    return manifest_of(file_entries(root))


def manifest_of(files: list[FileEntry]) -> dict[str, Any]:
    """A manifest shaped as ``build`` writes it, of one module, listing ``files``."""
    return {
        "schema": SCHEMA_VERSION,
        "tool": "xla-bugkit 0.1.0",
        "title": "XLA CPU compile crash: Check failed: x",
        "created": "2026-12-02T00:00:00+00:00",
        "versions": {"jax": "0.10.2"},
        "command": ["python", "train.py"],
        "xla_flags": [],
        "exit_status": -6,
        "failure": {
            "kind": "compile crash",
            "phase": "compile",
            "headline": "Check failed: x",
            "signature": "Check failed: x",
            "signal": "SIGABRT",
        },
        "guess": False,
        "modules": [
            {
                "label": "module_0000.jit_f",
                "name": "jit_f",
                "id": 0,
                "platform": "cpu",
                "reasons": ["JAX was compiling jit(f) when the run stopped"],
                "files": {"before_optimizations.hlo.pb": HLO},
                "replay": {"outcome": "reproduced: crash"},
            }
        ],
        "other_modules": 0,
        "data": "no input data (--no-data)",
        "notes": [],
        "files": files,
    }


BIG = 32 << 20  # zeros a member really holds where its manifest lists 7 bytes
Members = list[tuple[str, bytes]]


def listing(files: Members) -> list[FileEntry]:
    return [
        {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in files
    ]


def bundle_members(change: Callable[[Members], Members] = lambda m: m) -> Members:
    """A small bundle's members, its manifest listing the honest ones, then ``change``d."""
    files = [(ISSUE, ISSUE_DATA), (HLO, HLO_DATA)]
    manifest = json.dumps(manifest_of(listing(files))).encode()
    return change([(MANIFEST, manifest), *files])


def replacing(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [(n, data if n == name else d) for n, d in members]


def adding(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [*members, (name, data)]


# Each way a bundle can lie, and the reason it is refused with.
HOSTILE: dict[str, tuple[Callable[[Members], Members], str]] = {
    "a member bigger than listed": (
        replacing(HLO, bytes(BIG)),
        f"^{HLO} does not match its sha256 in the manifest$",
    ),
    "a member not listed": (
        adding("modules/extra.txt", b"surprise"),
        "holds files its manifest does not list: 'modules/extra.txt'$",
    ),
    "a member twice": (adding(HLO, HLO_DATA), f"refusing duplicate entry '{HLO}'$"),
    "a manifest twice": (adding(MANIFEST, b"{}"), f"has {MANIFEST} more than once$"),
    "a sha256 mismatch": (
        replacing(HLO, b"\x0a\x05jit_g"),
        f"^{HLO} does not match its sha256 in the manifest$",
    ),
    "a path 30,000 folders deep": (
        adding(DEEP, b"x"),
        r"refusing entry 'a/a/.*\(60001 characters\): name longer than 1024 bytes$",
    ),
    "an ISSUE.md grown past its slack": (
        replacing(ISSUE, bytes(len(ISSUE_DATA) + EDIT_SLACK + 1)),
        f"where its manifest lists {len(ISSUE_DATA)} and {EDIT_SLACK} more for edits$",
    ),
}


def hostile_bundle(tmp_path: Path, fmt: str, case: str) -> tuple[Path, str]:
    """The bundle of ``case`` in ``fmt``, and the reason it must be refused with."""
    change, reason = HOSTILE[case]
    return write_raw(fmt, tmp_path / f"bug{SUFFIX[fmt]}", bundle_members(change)), reason
