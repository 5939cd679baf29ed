"""``xla-bugkit repack BUNDLE OUT`` on a real bundle: what it may replace, and what not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import py7zr
import pytest

from xla_bugkit.cli.main import main

pytestmark = pytest.mark.slow  # a real jax program makes the bundle

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repack") / "bundle.7z"
    argv = [XLA_BUGKIT, "collect", "-q", "--no-replay", "-o", str(out),
            "--", sys.executable, str(PROGRAMS / "compile_error.py")]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 3, done.stderr
    return out


def zip_manifest(path: Path) -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]


def test_repack_writes_and_may_replace_an_earlier_bundle(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.zip"
    assert main(["repack", "-q", str(bundle), str(out)]) == 0
    assert zip_manifest(out)["failure"]["kind"] == "compile error"
    assert main(["repack", "-q", str(bundle), str(out)]) == 0  # a bundle: replaced
    assert zip_manifest(out)["failure"]["kind"] == "compile error"


def test_the_repacked_report_names_the_repacked_archive(bundle: Path, tmp_path: Path) -> None:
    # A maintainer follows ISSUE.md as written: attach and verify the .zip, not the .7z.
    out = tmp_path / "for-github.zip"
    assert main(["repack", "-q", str(bundle), str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        report = z.read("ISSUE.md").decode()
    assert "bundle.7z" not in report
    assert "attach for-github.zip" in report and "xla-bugkit verify for-github.zip" in report
    assert main(["verify", "-q", str(out)]) == 0  # its manifest records the new report


def test_a_repacked_folder_keeps_its_report_as_it_is(bundle: Path, tmp_path: Path) -> None:
    # The folder's name is none the report uses: "u" is no archive name to write over.
    folder = tmp_path / "u"
    with py7zr.SevenZipFile(bundle) as z:
        z.extractall(folder)
    out = tmp_path / "u.zip"
    assert main(["repack", "-q", str(folder), str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        assert z.read("ISSUE.md") == (folder / "ISSUE.md").read_bytes()
    assert main(["show", str(out)]) == 0


def test_repack_keeps_a_file_that_is_not_a_bundle_unless_forced(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.tar.gz"
    out.write_bytes(b"not a bundle")
    assert main(["repack", str(bundle), str(out)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} exists and is not an xla-bugkit bundle: choose another "
        "output, or pass --force to replace it\n"
    )
    assert out.read_bytes() == b"not a bundle"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.tar.gz"]
    assert main(["repack", "-q", "--force", str(bundle), str(out)]) == 0
    with tarfile.open(out) as tf:
        assert "manifest.json" in tf.getnames()


def test_repack_never_writes_over_something_that_is_not_a_file(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pipe.zip"
    os.mkfifo(out)
    assert main(["repack", "--force", str(bundle), str(out)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} exists and is not a regular file: choose another output\n"
    )
    assert out.is_fifo()


def test_repack_onto_itself_is_refused(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repack", str(bundle), str(bundle)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {bundle} is the bundle itself: choose another output name\n"
    )
