"""Mosaic's dumps (Pallas kernels on a TPU), each given to the module whose kernel it is.

libtpu writes one file per Mosaic pass per kernel into the folder ``--xla_mosaic_dump_to``
names (collect puts it at ``dump/mosaic/``): ``<ns since epoch>-<step>-mosaic-dump-<kernel
or anonymous>-post-<pass>.txt``. Neither the name nor the text names the XLA module; the
kernel is compiled while its module is, so a file belongs to the last module with a Pallas
kernel (a ``tpu_custom_call``) whose compilation had begun when the file was written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit.choose.dumps import TEXT_READ_LIMIT, DumpIndex, DumpModule, Role

FOLDER = "mosaic"  # under the dump root
KERNEL_TARGET = b"tpu_custom_call"
_NAME = re.compile(r"^(?P<ns>\d{15,20})-\d+-mosaic-dump-.+\.txt$")


def has_kernel(index: DumpIndex, module: DumpModule) -> bool:
    """Whether ``module`` holds a Pallas kernel (Mosaic's ``tpu_custom_call``), by its
    before-optimizations text."""
    text = module.first(Role.BEFORE_TEXT)
    if text is None or text.size > TEXT_READ_LIMIT:
        return False
    try:
        return KERNEL_TARGET in (index.root / text.path).read_bytes()
    except OSError:
        return False


def _started(module: DumpModule) -> float:
    """When XLA began compiling ``module``: its before-optimizations file's time."""
    before = module.first(Role.BEFORE_TEXT) or module.first(Role.BEFORE_PROTO)
    return before.mtime if before is not None else min(f.mtime for f in module.files)


def dumps_of(index: DumpIndex, modules: Sequence[DumpModule]) -> dict[str, list[Path]]:
    """The Mosaic dump files of each of ``modules`` (by label), oldest first; a module
    without a Pallas kernel has none."""
    files = [
        (int(m["ns"]) / 1e9, f.path)
        for f in index.stray
        if f.path.parts[:1] == (FOLDER,) and (m := _NAME.match(f.path.name))
    ]
    if not files:
        return {}
    kernels = sorted((_started(m), m.label) for m in index.modules if has_kernel(index, m))
    wanted = {m.label for m in modules}
    found: dict[str, list[Path]] = {}
    for written, path in sorted(files):
        # File times have a second's resolution on some file systems (or in a tar); a dump
        # folder copied without its times leaves the one module with kernels, if one.
        owners = [label for started, label in kernels if int(started) <= written]
        owner = owners[-1] if owners else kernels[0][1] if len(kernels) == 1 else None
        if owner in wanted:
            found.setdefault(owner, []).append(index.root / path)
    return found
