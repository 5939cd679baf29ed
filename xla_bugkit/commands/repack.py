"""``xla-bugkit repack BUNDLE OUT``: the same bundle in another format (GitHub takes .zip)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.commands.verify import check_integrity, load_manifest
from xla_bugkit.errors import EXIT_OK, BugkitError
from xla_bugkit.ui import Ui


def repack(bundle: Path, out: Path, *, fmt: str | None = None, ui: Ui | None = None) -> int:
    """Unpack ``bundle`` safely, check it against its manifest, and write it again as ``out``."""
    ui = ui or Ui()
    if out.resolve() == bundle.resolve():
        raise BugkitError(f"{out} is the bundle itself: choose another output name")
    chosen = archive.output_format(out, fmt)
    manifest = load_manifest(bundle)
    work = Path(tempfile.mkdtemp(prefix="xla-bugkit-repack-"))
    try:
        extracted = archive.extract_safely(bundle, work)
        check_integrity(work, manifest, extracted)
        files = {p.relative_to(work).as_posix(): p for p in sorted(extracted) if p.is_file()}
        size = archive.write_archive(files, out, chosen, progress=ui.progress("compressing"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ui.say(f"wrote {out} ({size:,} bytes, {chosen})")
    return EXIT_OK
