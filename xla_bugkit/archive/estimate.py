"""How small a file will compress, told before compressing it: a size budget can then leave
out what cannot fit without compressing it first (LZMA spends minutes on a 400 MB snapshot of
random values, longer than the run that wrote it)."""

from __future__ import annotations

import lzma
import zlib
from pathlib import Path

SAMPLE = 1 << 20  # bytes read from each of the file's start, middle and end
# The estimate stays below what the whole file's stronger compression (7z's LZMA preset 9,
# zip's Deflate at level 6) gives, so that it never says a file cannot fit when it would:
# the sample's ratio is squared (the better data compresses, the more a stronger level
# gains on it: zeros shrink three times more at level 9 than at level 1), then taken at
# MARGIN. Random values, the case that matters, still come out near half their size.
MARGIN = 0.7


def compressed_size(path: Path, fmt: str = "7z") -> int:
    """An optimistic estimate of ``path``'s size once compressed into a ``fmt`` archive:
    the format's compressor, at a fast level, on samples from the file's start, middle and
    end; the size times that ratio squared, times ``MARGIN``."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb") as f:
        if size <= 3 * SAMPLE:
            sample = f.read()
        else:
            parts = []
            for at in (0, size // 2 - SAMPLE // 2, size - SAMPLE):
                f.seek(at)
                parts.append(f.read(SAMPLE))
            sample = b"".join(parts)
    packed = lzma.compress(sample, preset=1) if fmt == "7z" else zlib.compress(sample, 1)
    ratio = min(len(packed) / max(len(sample), 1), 1.0)
    return int(size * ratio * ratio * MARGIN)
