"""``xla-bugkit show BUNDLE``: what a bundle shares, read without extracting it to disk.

The bundle is first read through every check ``verify`` makes (nothing is written): a bundle
``verify`` would refuse is not shown as if it were sound.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle.manifest import Manifest, check_bundle
from xla_bugkit.bundle.members import ISSUE
from xla_bugkit.errors import BadBundleError, ExitCode

ISSUE_LIMIT = 4 << 20


def _printable(name: str) -> str:
    # Entry names come from an untrusted archive: never let them drive the terminal.
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)


def render(path: Path, manifest: Manifest) -> str:
    """The bundle's failure, modules, notes and every file with its size."""
    entries = archive.list_entries(path)
    failure = manifest["failure"]  # the loader checked every key read here
    lines = [
        f"{path.name}: made by {manifest['tool']} on {manifest['created']}",
        f"failure: {failure['kind']}: {failure.get('headline', '')}",
        f"inputs: {manifest['data']}",
    ]
    for m in manifest["modules"]:
        verdict = (m["replay"] or {}).get("outcome", "not replayed")
        lines.append(f"module {m['label']}: {verdict}; chosen because {'; '.join(m['reasons'])}")
    lines += [f"note: {n}" for n in manifest["notes"]]
    total = sum(e.size for e in entries if e.is_file)
    lines.append(f"{len(entries)} files, {total / 1e6:.2f} MB uncompressed:")
    lines += [f"  {e.size:>12,}  {_printable(e.name)}" for e in entries if e.is_file]
    return "\n".join(lines)


def show(bundle: Path, *, json_output: bool = False, issue: bool = False) -> int:
    """CLI: print what ``bundle`` holds (``--json``: its manifest; ``issue``: its ISSUE.md)."""
    try:
        manifest = check_bundle(bundle)
    except BadBundleError as e:
        raise BadBundleError(f"this bundle would be refused: {e}") from None
    if issue:
        text = archive.read_member(bundle, ISSUE, ISSUE_LIMIT).decode("utf-8", "replace")
        sys.stdout.write(text)
    elif json_output:
        json.dump(manifest, sys.stdout, indent=2)
        print()
    else:
        print(render(bundle, manifest))
    return ExitCode.OK
