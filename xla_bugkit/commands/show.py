"""``xla-bugkit show BUNDLE``: what a bundle shares, read without extracting it to disk.

The bundle is first read through every check ``verify`` makes (nothing is written): a bundle
``verify`` would refuse is not shown as if it were sound.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle.manifest import Manifest, check_bundle
from xla_bugkit.bundle.manifest.schema import ModuleEntry
from xla_bugkit.bundle.members import ISSUE
from xla_bugkit.choose.dumps import Role
from xla_bugkit.errors import BadBundleError, BugkitError, ExitCode
from xla_bugkit.ui import shown

ISSUE_LIMIT = 4 << 20
MODULE_LIMIT = 1 << 30  # a module proto larger than this is not one to draw


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


def graph_module(manifest: Manifest, module_re: str | None) -> ModuleEntry:
    """The module to draw: the one ``module_re`` matches, else the shrunk one, else the
    module the bundle was made for."""
    modules = [m for m in manifest["modules"] if Role.BEFORE_PROTO.value in m["files"]]
    if module_re is not None:
        modules = [m for m in modules if re.search(module_re, m["label"])]
    else:
        modules.sort(key=lambda m: not m["label"].endswith(".shrunk"))
    if not modules:
        labels = ", ".join(m["label"] for m in manifest["modules"]) or "none"
        raise BugkitError(f"no module with an HLO proto to draw (modules: {labels})")
    return modules[0]


def write_graph(
    bundle: Path, manifest: Manifest, out: Path, module_re: str | None, force: bool
) -> str:
    """Draw a bundled module into ``out`` (.html or .dot); returns the module's label."""
    from xla_bugkit.convert import convert, output_form

    if output_form(out, None) not in ("html", "dot"):
        raise BugkitError(f"{out.name}: --graph writes .html or .dot")
    module = graph_module(manifest, module_re)
    data = archive.read_member(bundle, module["files"][Role.BEFORE_PROTO.value], MODULE_LIMIT)
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-graph-") as tmp:
        source = Path(tmp, f"{module['label']}.hlo.pb")
        source.write_bytes(data)
        convert(source, out, force=force)
    return module["label"]


def show(
    bundle: Path,
    *,
    json_output: bool = False,
    issue: bool = False,
    graph: Path | None = None,
    module_re: str | None = None,
    force: bool = False,
) -> int:
    """CLI: print what ``bundle`` holds (``--json``: its manifest; ``issue``: its ISSUE.md;
    ``graph``: draw a module into that file)."""
    try:
        manifest = check_bundle(bundle)
    except BadBundleError as e:
        raise BadBundleError(f"this bundle would be refused: {e}") from None
    if graph is not None:
        label = write_graph(bundle, manifest, graph, module_re, force)
        print(f"wrote {graph}: the graph of {label}")
    elif issue:
        text = archive.read_member(bundle, ISSUE, ISSUE_LIMIT).decode("utf-8", "replace")
        # As it is into a pipe (gh issue create); on a terminal, nothing it could act on.
        sys.stdout.write(shown(text) if sys.stdout.isatty() else text)
    elif json_output:
        json.dump(manifest, sys.stdout, indent=2)
        print()
    else:
        print(shown(render(bundle, manifest)))
    return ExitCode.OK
