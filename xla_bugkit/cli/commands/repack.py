"""``xla-bugkit repack BUNDLE OUT``: the same bundle in another format (GitHub takes .zip)."""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.cli import options
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.ui import Ui

HELP = "write a bundle again in another format (GitHub accepts .zip, not .7z)"
DESCRIPTION = (
    "Unpack a bundle safely, check it against its manifest, and write it again in the format "
    "OUT's name asks for."
)
EPILOG = """\
examples:
  xla-bugkit repack bundle.7z bundle.zip
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="the bundle to read")
    p.add_argument("out", type=Path, help="the bundle to write: .zip, .tar.gz or .7z")
    options.add_force(p, "replace an existing OUT that is not an xla-bugkit bundle")


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Unpack the bundle safely, check it against its manifest, and write it again as OUT;
    edited human text (ISSUE.md, ...) is re-sealed: the new manifest records its new hashes.

    An existing OUT is replaced only if it is an xla-bugkit bundle, or with ``--force``.
    """
    from xla_bugkit.bundle.manifest import edited_notice, open_bundle, renamed, reseal
    from xla_bugkit.bundle.output import check_output

    bundle: Path = args.bundle
    out: Path = args.out
    if out.resolve() == bundle.resolve():
        raise BugkitError(f"{out} is the bundle itself: choose another output name")
    chosen = check_output(out, None, force=args.force)
    with open_bundle(bundle, prefix="xla-bugkit-repack-") as b:
        manifest = b.manifest
        if b.edited:
            # Edited human text (ISSUE.md) is sealed again: the new manifest has its hashes.
            manifest = reseal(b)
            for name in b.edited:
                ui.say(f"{edited_notice(name)}: the new bundle's manifest records it as it is")
        # ISSUE.md names the archive to attach and verify: now ``out``.
        renamed(b, manifest, bundle.name, out.name)
        files = {p.relative_to(b.root).as_posix(): p for p in sorted(b.files) if p.is_file()}
        size = archive.write_archive(files, out, chosen, progress=ui.progress("compressing"))
    ui.say(f"wrote {out} ({size:,} bytes, {chosen})")
    return ExitCode.OK
