"""``xla-bugkit repack BUNDLE OUT``: the same bundle in another format (GitHub takes .zip)."""

from __future__ import annotations

from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle.manifest import open_bundle
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.ui import Ui


def repack(bundle: Path, out: Path, *, fmt: str | None = None, ui: Ui | None = None) -> int:
    """Unpack ``bundle`` safely, check it against its manifest, and write it again as ``out``."""
    ui = ui or Ui()
    if out.resolve() == bundle.resolve():
        raise BugkitError(f"{out} is the bundle itself: choose another output name")
    chosen = archive.output_format(out, fmt)
    with open_bundle(bundle, prefix="xla-bugkit-repack-") as b:
        files = {p.relative_to(b.root).as_posix(): p for p in sorted(b.files) if p.is_file()}
        size = archive.write_archive(files, out, chosen, progress=ui.progress("compressing"))
    ui.say(f"wrote {out} ({size:,} bytes, {chosen})")
    return ExitCode.OK
