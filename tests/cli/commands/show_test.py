"""``show`` on bundles built here (no jax): a bundle ``verify`` would refuse is not shown as
sound, but refused with the reason, exit 4, and nothing written anywhere.

The real bundle of a real run is shown in verify_test (it needs a collect).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.bundles import (
    HLO,
    HOSTILE,
    ISSUE,
    ISSUE_DATA,
    Members,
    bundle_members,
    hostile_bundle,
)
from tests.helpers.hostile import snapshot, tree, write_raw
from xla_bugkit.bundle.members import MANIFEST
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode
from xla_bugkit.ui import shown

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))  # the installed command
REFUSED = "xla-bugkit: error: this bundle would be refused: "


@pytest.fixture
def quiet_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cwd and TMPDIR, to see that show writes nothing."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("TMPDIR", str(here))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    return here


def test_show_lists_a_sound_bundle(
    tmp_path: Path, quiet_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_raw("zip", tmp_path / "bug.zip", bundle_members())
    assert main(["show", str(path)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "failure: compile crash: Check failed: x" in out
    assert f"{len(ISSUE_DATA):>14,}  {ISSUE}" in out and HLO in out
    assert main(["show", "--issue", str(path)]) == ExitCode.OK
    assert capsys.readouterr().out == ISSUE_DATA.decode()
    assert tree(quiet_dirs) == set()


@pytest.mark.parametrize("fmt", ["zip", "7z", "tar.gz"])
def test_show_lists_the_files_by_name_in_every_format(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written in this order, not by name: manifest.json, ISSUE.md, then the module.
    members = bundle_members()
    path = write_raw(fmt, tmp_path / f"bug.{fmt}", members)
    assert main(["show", str(path)]) == ExitCode.OK
    out = capsys.readouterr().out
    listed = out.split(" MB uncompressed:\n", 1)[1].splitlines()
    assert [line.split()[-1] for line in listed] == sorted(name for name, _ in members)
    assert f"{len(members)} files, " in out


@pytest.mark.parametrize("fmt", ["zip", "7z", "tar.gz"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_show_refuses_what_verify_would(
    fmt: str,
    case: str,
    tmp_path: Path,
    quiet_dirs: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, reason = hostile_bundle(tmp_path, fmt, case)
    for options in ([], ["--json"], ["--issue"]):
        assert main(["show", *options, str(path)]) == ExitCode.BAD_BUNDLE
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(REFUSED), captured.err
        assert re.search(reason, captured.err.removeprefix(REFUSED).rstrip("\n"))
        assert captured.err.count("\n") == 1
    assert tree(quiet_dirs) == set()


def test_show_refuses_a_symlink(
    tmp_path: Path, quiet_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_raw("zip", tmp_path / "bug.zip", bundle_members())
    link = zipfile.ZipInfo("evil")
    link.create_system = 3  # unix: the high 16 bits of external_attr are st_mode
    link.external_attr = 0o120777 << 16
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(link, "/etc/passwd")
    assert main(["show", str(path)]) == ExitCode.BAD_BUNDLE
    assert capsys.readouterr().err == f"{REFUSED}{path}: refusing symlink entry 'evil'\n"


def test_installed_show_refuses_a_lying_bundle(tmp_path: Path) -> None:
    """End to end: the installed command, on a bundle whose member is 32 MiB where its
    manifest lists 7 bytes, with its TMPDIR where the test can look."""
    path, _ = hostile_bundle(tmp_path, "zip", "a member bigger than listed")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = subprocess.run(
        [XLA_BUGKIT, "show", str(path)],
        capture_output=True,
        text=True,
        timeout=300,  # a bound on a hang, not a measure of speed
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=tmp,
    )
    assert done.returncode == ExitCode.BAD_BUNDLE, done.stderr
    assert done.stderr == f"{REFUSED}{HLO} does not match its sha256 in the manifest\n"
    assert done.stdout == "" and tree(tmp) == set()


ESCAPES = "\x1b[2J\x1b]0;PWNED\x07\x1b[31mall good\x1b[0m"


def test_a_strangers_escape_sequences_never_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest's strings are the reporter's to write: an escape sequence in them would
    clear the screen or set the window title of whoever shows or verifies the bundle."""

    def tampered(members: Members) -> Members:
        manifest = json.loads(members[0][1])
        manifest["failure"]["headline"] = manifest["title"] = ESCAPES
        manifest["notes"] = [ESCAPES]
        return [(members[0][0], json.dumps(manifest).encode()), *members[1:]]

    bundle = write_raw("zip", tmp_path / "bug.zip", bundle_members(tampered))
    assert main(["show", str(bundle)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b]0;PWNED\\x07" in out  # spelled out, so the reader sees it
    assert shown("line\n\tindented") == "line\n\tindented"  # what text needs stays


def unpacked(root: Path, members: Members) -> Path:
    """``members`` written into the folder ``root``, as unzipping their archive would."""
    for name, data in members:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_show_lists_an_unpacked_bundle_and_writes_nothing_into_it(
    tmp_path: Path, quiet_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = unpacked(tmp_path / "bug", bundle_members())
    before = snapshot(folder)
    assert main(["show", str(folder)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert out.startswith("bug: made by xla-bugkit 0.1.0")
    assert f"{len(ISSUE_DATA):>14,}  {ISSUE}" in out and HLO in out
    assert main(["show", "--issue", str(folder)]) == ExitCode.OK
    assert capsys.readouterr().out == ISSUE_DATA.decode()
    assert snapshot(folder) == before and tree(quiet_dirs) == set()


# The lies of ``HOSTILE`` that a folder can hold (a file system has no duplicate names).
IN_A_FOLDER = (
    "a member bigger than listed",
    "a member not listed",
    "a sha256 mismatch",
    "an ISSUE.md grown past its slack",
)


def _linked_out(folder: Path, name: str, tmp_path: Path) -> None:
    """``name`` (a file or a folder) moved out of ``folder``, a link to it left in its
    place: what it leads to is exactly what the manifest lists."""
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    target = (folder / name).rename(tmp_path / "elsewhere" / Path(name).name)
    (folder / name).symlink_to(target, target_is_directory=target.is_dir())


# What a stranger's folder can hold besides files, and the reason it is refused with.
FOLDER_TRICKS: dict[str, tuple[Callable[[Path, Path], object], str]] = {
    "a link to a file outside": (
        lambda f, _: (f / "modules" / "passwd").symlink_to("/etc/passwd"),
        "refusing symlink entry 'modules/passwd'",
    ),
    "a link to a folder outside": (
        lambda f, _: (f / "modules" / "etc").symlink_to("/etc", target_is_directory=True),
        "refusing symlink entry 'modules/etc'",
    ),
    "a listed file that is a link": (
        lambda f, tmp: _linked_out(f, HLO, tmp),
        f"refusing symlink entry '{HLO}'",
    ),
    "a listed folder that is a link": (
        lambda f, tmp: _linked_out(f, "modules", tmp),
        "refusing symlink entry 'modules'",
    ),
    "a manifest that is a link": (
        lambda f, tmp: _linked_out(f, MANIFEST, tmp),
        "refusing symlink entry 'manifest.json'",
    ),
    "a FIFO": (lambda f, _: os.mkfifo(f / "pipe"), "refusing special file entry 'pipe'"),
    "a FIFO for a manifest": (
        lambda f, _: (f / MANIFEST).unlink() or os.mkfifo(f / MANIFEST),
        "refusing 'manifest.json': it is not a plain file",
    ),
}


@pytest.mark.parametrize("case", IN_A_FOLDER + tuple(FOLDER_TRICKS))
def test_show_refuses_an_unpacked_bundle_as_it_would_its_archive(
    case: str, tmp_path: Path, quiet_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if case in FOLDER_TRICKS:
        trick, reason = FOLDER_TRICKS[case]
        folder = unpacked(tmp_path / "bug", bundle_members())
        trick(folder, tmp_path)
        reason = re.escape(f"{folder}: {reason}") + "$"
    else:
        change, reason = HOSTILE[case]
        folder = unpacked(tmp_path / "bug", bundle_members(change))
    before = snapshot(folder)
    for options in ([], ["--issue"]):
        assert main(["show", *options, str(folder)]) == ExitCode.BAD_BUNDLE
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1
        assert re.search(reason, captured.err.removeprefix(REFUSED).rstrip("\n")), captured.err
    assert snapshot(folder) == before and tree(quiet_dirs) == set()


def test_a_folder_that_is_no_bundle_is_said_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")

    def walked(*args: object, **kwargs: object) -> object:
        raise AssertionError("a folder without a manifest is walked end to end")

    monkeypatch.setattr(os, "walk", walked)  # a home given by mistake is not read through
    assert main(["show", str(tmp_path / "photos")]) == ExitCode.BAD_BUNDLE
    err = capsys.readouterr().err
    assert err == f"{REFUSED}{tmp_path / 'photos'} has no manifest.json: not an xla-bugkit bundle\n"


def test_a_link_to_an_unpacked_bundle_is_followed_as_a_link_to_an_archive_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = unpacked(tmp_path / "bug", bundle_members())
    (tmp_path / "latest").symlink_to(folder, target_is_directory=True)
    assert main(["show", str(tmp_path / "latest")]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("latest: made by xla-bugkit")
