"""``xla-bugkit show BUNDLE``: what a bundle shares, read without extracting it to disk.

The bundle is first read through every check ``verify`` makes (nothing is written): a bundle
``verify`` would refuse is not shown as if it were sound.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import archive
from xla_bugkit.bundle.members import ISSUE
from xla_bugkit.cli import options
from xla_bugkit.errors import BadBundleError, BugkitError, ExitCode
from xla_bugkit.ui import Ui, shown

if TYPE_CHECKING:
    from xla_bugkit.bundle.manifest import Manifest
    from xla_bugkit.bundle.manifest.schema import ModuleEntry

HELP = "list what a bundle shares, without extracting it"
DESCRIPTION = (
    "Print a bundle's failure, modules, notes and every file with its size, reading the "
    "archive in place."
)
EPILOG = """\
examples:
  xla-bugkit show bundle.7z
  xla-bugkit show --json bug.zip
  xla-bugkit show bundle.7z --graph module.html
      draw the shrunk module (or the chosen one) as a page that renders its graph
"""

ISSUE_LIMIT = 4 << 20
MODULE_LIMIT = 1 << 30  # a module proto larger than this is not one to draw


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_bundle(p)
    options.add_json(p, "print the manifest as JSON")
    p.add_argument("--issue", action="store_true", help="print the bundle's ISSUE.md")
    p.add_argument("--graph", type=Path, metavar="OUT",
                   help="write a module's graph to OUT (.html, or .dot for Graphviz)")  # fmt: skip
    options.add_module(p, "with --graph: the module whose label matches REGEX")
    options.add_force(p, "with --graph: replace OUT")


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Print what the bundle holds (``--json``: its manifest; ``--issue``: its ISSUE.md;
    ``--graph``: draw a module into that file)."""
    from xla_bugkit.bundle.manifest import check_bundle

    bundle: Path = args.bundle
    try:
        manifest = check_bundle(bundle)
    except BadBundleError as e:
        raise BadBundleError(f"this bundle would be refused: {e}") from None
    if args.graph is not None:
        label = write_graph(bundle, manifest, args.graph, args.module_re, args.force)
        print(f"wrote {args.graph}: the graph of {label}")
    elif args.issue:
        text = archive.read_member(bundle, ISSUE, ISSUE_LIMIT).decode("utf-8", "replace")
        # As it is into a pipe (gh issue create); on a terminal, nothing it could act on.
        sys.stdout.write(shown(text) if sys.stdout.isatty() else text)
    else:
        options.emit(args.json, lambda: manifest, lambda: shown(render(bundle, manifest)))
    return ExitCode.OK


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
    job = manifest.get("job")
    for part in job.get("merged", []) if job is not None else []:
        mark = "the part it is judged by" if part.get("judged_by") else part.get("folder")
        how = part.get("peer") and f"taken down by the job: {part['peer']}"
        lines.append(
            f"job part {part.get('part')} ({mark}): {how or part.get('kind')}, "
            f"ended {part.get('ended')}, first module {part.get('first_module')}"
        )
    # By name, whatever order the archive holds them in (a 7z's follows its packing).
    files = sorted((e for e in entries if e.is_file), key=lambda e: e.name)
    total = sum(e.size for e in files)
    lines.append(f"{len(files)} files, {total / 1e6:.2f} MB uncompressed:")
    lines += [f"  {e.size:>12,}  {_printable(e.name)}" for e in files]
    return "\n".join(lines)


def graph_module(manifest: Manifest, module_re: str | None) -> ModuleEntry:
    """The module to draw: the one ``module_re`` matches, else the shrunk one, else the
    module the bundle was made for."""
    from xla_bugkit.choose.dumps import Role

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
    from xla_bugkit.choose.dumps import Role
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
