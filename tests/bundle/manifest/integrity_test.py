"""``open_bundle`` and ``check_bundle`` on hostile bundles built for real in each format: the
manifest drives the extraction, so a bundle that lies is refused before it fills the disk,
and nothing is left in the temporary directory.

Checked by what got through (bytes that reached a sink, files left behind), never by time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.helpers.bundles import (
    HLO,
    HLO_DATA,
    HOSTILE,
    ISSUE,
    ISSUE_DATA,
    MANIFEST,
    bundle_members,
    hostile_bundle,
    replacing,
)
from tests.helpers.hostile import (
    SUFFIX,
    Tally,
    tar_with_zeros_after,
    tree,
    write_raw,
)
from xla_bugkit import archive
from xla_bugkit.bundle.manifest import (
    EDIT_SLACK,
    check_bundle,
    open_bundle,
    reseal,
)
from xla_bugkit.errors import BadBundleError


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
    path = write_raw(fmt, tmp_path / f"bug{SUFFIX[fmt]}", bundle_members(replacing(ISSUE, edited)))
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
