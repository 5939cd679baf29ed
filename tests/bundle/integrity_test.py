"""``open_bundle`` and ``check_bundle`` on hostile bundles built for real in each format: the
manifest drives the extraction, so a bundle that lies is refused before it fills the disk,
and nothing is left in the temporary directory.

Checked by what got through (bytes that reached a sink, files left behind), never by time.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.hostile import (
    DEEP,
    SUFFIX,
    Tally,
    tar_with_zeros_after,
    tree,
    write_raw,
)

from tests.bundle.manifest_test import HLO, HLO_DATA, ISSUE, ISSUE_DATA, manifest_of
from xla_bugkit import archive
from xla_bugkit.bundle.manifest import (
    EDIT_SLACK,
    FileEntry,
    check_bundle,
    open_bundle,
    reseal,
)
from xla_bugkit.bundle.members import MANIFEST
from xla_bugkit.errors import BadBundleError

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


def _replace(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [(n, data if n == name else d) for n, d in members]


def _add(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [*members, (name, data)]


# Each way a bundle can lie, and the reason it is refused with.
HOSTILE: dict[str, tuple[Callable[[Members], Members], str]] = {
    "a member bigger than listed": (
        _replace(HLO, bytes(BIG)),
        f"^{HLO} does not match its sha256 in the manifest$",
    ),
    "a member not listed": (
        _add("modules/extra.txt", b"surprise"),
        "holds files its manifest does not list: 'modules/extra.txt'$",
    ),
    "a member twice": (_add(HLO, HLO_DATA), f"refusing duplicate entry '{HLO}'$"),
    "a manifest twice": (_add(MANIFEST, b"{}"), f"has {MANIFEST} more than once$"),
    "a sha256 mismatch": (
        _replace(HLO, b"\x0a\x05jit_g"),
        f"^{HLO} does not match its sha256 in the manifest$",
    ),
    "a path 30,000 folders deep": (
        _add(DEEP, b"x"),
        r"refusing entry 'a/a/.*\(60001 characters\): name longer than 1024 bytes$",
    ),
    "an ISSUE.md grown past its slack": (
        _replace(ISSUE, bytes(len(ISSUE_DATA) + EDIT_SLACK + 1)),
        f"where its manifest lists {len(ISSUE_DATA)} and {EDIT_SLACK} more for edits$",
    ),
}


def hostile_bundle(tmp_path: Path, fmt: str, case: str) -> tuple[Path, str]:
    """The bundle of ``case`` in ``fmt``, and the reason it must be refused with."""
    change, reason = HOSTILE[case]
    return write_raw(fmt, tmp_path / f"bug{SUFFIX[fmt]}", bundle_members(change)), reason


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory open_bundle unpacks into, where the test can look."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.mark.parametrize("fmt", archive.FORMATS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_lying_bundle_is_refused_and_leaves_nothing(
    fmt: str, case: str, tmp_path: Path, tmpdir_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, reason = hostile_bundle(tmp_path, fmt, case)
    tally = Tally(monkeypatch)
    with pytest.raises(BadBundleError, match=reason), open_bundle(path):
        pass
    assert tree(tmpdir_here) == set()
    listed = len(HLO_DATA) + len(ISSUE_DATA) + EDIT_SLACK + len(bundle_members()[0][1])
    assert tally.total <= listed, "never more than the manifest lists and edits may add"
    with pytest.raises(BadBundleError, match=reason):
        check_bundle(path)


def test_a_tar_gz_with_zeros_after_its_end_is_refused_at_the_cap(
    tmp_path: Path, tmpdir_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tar_with_zeros_after(tmp_path / "bug.tar.gz", bundle_members(), zeros=256 << 20)
    tally = Tally(monkeypatch)
    refused = "bytes of zeros after its last member"
    with pytest.raises(BadBundleError, match=refused), open_bundle(path):
        pass
    with pytest.raises(BadBundleError, match=refused):
        check_bundle(path)
    assert tally.decompressed < 8 << 20, "256 MiB of zeros, not read to their end"
    assert tree(tmpdir_here) == set()


@pytest.mark.parametrize("fmt", archive.FORMATS)
def test_edits_within_the_slack_are_reported_and_resealed(
    fmt: str, tmp_path: Path, tmpdir_here: Path
) -> None:
    edited = ISSUE_DATA + b"Mine: it fails on every run.\n" * 1000
    path = write_raw(fmt, tmp_path / f"bug{SUFFIX[fmt]}", bundle_members(_replace(ISSUE, edited)))
    assert check_bundle(path)["modules"][0]["files"] == {"before_optimizations.hlo.pb": HLO}
    with open_bundle(path) as b:
        assert b.edited == (ISSUE,)
        assert (b.root / ISSUE).read_bytes() == edited
        record = reseal(b)
    entry = next(f for f in record["files"] if f["path"] == ISSUE)
    assert entry["size"] == len(edited)
    assert tree(tmpdir_here) == set()


def test_check_bundle_writes_nothing(
    tmp_path: Path, tmpdir_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_raw("zip", tmp_path / "bug.zip", bundle_members())
    monkeypatch.chdir(tmpdir_here)
    tally = Tally(monkeypatch)
    assert check_bundle(path)["title"] == "XLA CPU compile crash: Check failed: x"
    assert tally.sunk.keys() == {MANIFEST, ISSUE, HLO}, "every member read and hashed"
    assert tree(tmpdir_here) == set()
