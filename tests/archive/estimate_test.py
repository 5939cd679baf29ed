"""The compressed-size estimate a size budget is checked against before compressing: it
must never say a file will not fit when it would (optimistic), and must see that random
values do not compress."""

from __future__ import annotations

import lzma
import zlib
from pathlib import Path

import numpy as np
import pytest

from xla_bugkit.archive import compressed_size
from xla_bugkit.archive.estimate import SAMPLE

rng = np.random.default_rng(0)

CONTENTS = {
    "random float32": rng.standard_normal(1 << 20).astype(np.float32).tobytes(),  # 4 MiB
    "zeros": bytes(5 * SAMPLE),
    "a ramp of float64": np.linspace(0, 1, 1 << 19).tobytes(),  # 4 MiB
    "small text": b"HloModule jit_f\n" * 100,
}


@pytest.mark.parametrize("name", CONTENTS)
def test_the_estimate_is_never_above_what_compression_gives(name: str, tmp_path: Path) -> None:
    path = tmp_path / "member"
    path.write_bytes(CONTENTS[name])
    # 7z compresses with LZMA (preset 9 at most), zip and tar.gz with Deflate.
    assert compressed_size(path, "7z") <= len(lzma.compress(CONTENTS[name], preset=9))
    for fmt in ("zip", "tar.gz"):
        assert compressed_size(path, fmt) <= len(zlib.compress(CONTENTS[name], 9))


def test_random_values_are_seen_not_to_compress(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.pb"
    path.write_bytes(CONTENTS["random float32"])
    # Most of a float32 standard normal is its mantissa: it keeps most of its size.
    for fmt in ("7z", "zip"):
        assert compressed_size(path, fmt) >= 0.4 * path.stat().st_size
    empty = tmp_path / "empty"
    empty.touch()
    assert compressed_size(empty) == 0
