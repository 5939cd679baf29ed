"""Releases listed from a folder of wheels, and unpacked once into the cache, safely."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

from xla_bugkit.cli.main import main
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.releases import cache, index

TAG = index.python_tag()


def wheel(folder: Path, name: str, members: dict[str, bytes]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return path


def release_wheels(folder: Path, version: str, tag: str = TAG, jax: bool = True) -> None:
    wheel(folder, f"jaxlib-{version}-{tag}-{tag}-manylinux_2_27_x86_64.whl",
          {"jaxlib/version.py": f"__version__ = {version!r}\n".encode()})  # fmt: skip
    if jax:
        wheel(folder, f"jax-{version}-py3-none-any.whl", {"jax/__init__.py": b""})


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(autouse=True)
def on_x86(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index.platform, "machine", lambda: "x86_64")


def test_a_folder_lists_what_this_interpreter_can_load_and_says_why_not_the_rest(
    tmp_path: Path,
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.10.2", "0.8.1", "0.9.0.1"):
        release_wheels(wheels, v)
    release_wheels(wheels, "0.4.13")  # older than the replay drives
    release_wheels(wheels, "0.11.0", tag="cp399")  # another Python's
    release_wheels(wheels, "0.7.2", jax=False)
    (wheels / "notes.txt").write_text("not a wheel")
    found = index.from_folder(wheels)
    assert found.tried == ("0.8.1", "0.9.0.1", "0.10.2")  # in version order, not by name
    why = dict(found.untried)
    assert why["0.4.13"].startswith("older than 0.4.18")
    assert why["0.7.2"] == "no jax wheel beside it"
    assert why["0.11.0"] == "a cp399 wheel: give --python with that Python to try it"
    assert found.between("0.9", None).tried == ("0.9.0.1", "0.10.2")
    assert found.between(None, "0.9.0.1").tried == ("0.8.1", "0.9.0.1")
    assert found.with_installed("0.9.2").tried == ("0.8.1", "0.9.0.1", "0.9.2", "0.10.2")
    assert found.with_installed("not installed") == found


def test_a_release_is_unpacked_once_and_then_taken_from_the_cache(
    tmp_path: Path, own_cache: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    got = cache.release("0.8.1", wheels)
    assert got.version == "0.8.1"
    assert got.path.parent.parent == own_cache
    assert (got.path / "jaxlib" / "version.py").read_text() == "__version__ = '0.8.1'\n"
    assert (got.path / "jax" / "__init__.py").is_file()
    for path in wheels.iterdir():
        path.unlink()  # the cache alone serves it now
    assert cache.release("0.8.1", wheels) == got
    assert cache.cached("0.8.1") == got
    assert [p.name for p in got.path.parent.iterdir()] == [got.path.name]  # nothing left over
    assert cache.remove("0.8.1") and cache.cached("0.8.1") is None


@pytest.mark.parametrize(
    "member", ["../escape.py", "/etc/escape.py", "jax/../../escape.py", "jax\\..\\escape.py"]
)
def test_a_wheel_whose_member_leaves_its_folder_is_refused_whole(
    tmp_path: Path, member: str
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    wheel(wheels, "jax-0.8.1-py3-none-any.whl", {"jax/__init__.py": b"", member: b"boom"})
    with pytest.raises(BugkitError, match="leaves its folder"):
        cache.release("0.8.1", wheels)
    assert cache.cached("0.8.1") is None
    assert not (tmp_path / "escape.py").exists()
    assert list((tmp_path / "cache" / "releases").iterdir()) == []  # no partial release


def test_a_symlink_member_is_refused(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    info = zipfile.ZipInfo("jax/link")
    info.external_attr = (0o120777) << 16
    with zipfile.ZipFile(wheels / "jax-0.8.1-py3-none-any.whl", "w") as z:
        z.writestr(info, "/etc/passwd")
    with pytest.raises(BugkitError, match="not a plain file"):
        cache.release("0.8.1", wheels)


def test_a_corrupt_wheel_and_a_missing_one_are_clear_errors(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    (wheels / f"jaxlib-0.8.1-{TAG}-{TAG}-manylinux_2_27_x86_64.whl").write_bytes(b"not a zip")
    with pytest.raises(BugkitError, match="is not a readable wheel"):
        cache.release("0.8.1", wheels)
    with pytest.raises(BugkitError, match=rf"lacks the jaxlib \({TAG}\) or jax wheel of 0\.9\.0"):
        cache.release("0.9.0", wheels)


def test_too_little_room_says_how_much_and_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    usage = cache.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(cache.shutil, "disk_usage", lambda _: usage._replace(free=1000))
    with pytest.raises(BugkitError, match=f"free some, or set {cache.CACHE_ENV}"):
        cache.release("0.8.1", wheels)
    assert cache.cached("0.8.1") is None


def test_the_releases_used_longest_ago_make_room_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.8.1", "0.9.0", "0.10.1"):
        release_wheels(wheels, v)
        wheel(wheels, f"jax-{v}-py3-none-any.whl", {"jax/__init__.py": b"", "jax/w": bytes(1000)})
    first = cache.release("0.8.1", wheels)
    size = cache.entries()[0].size
    assert size > 1000  # recorded in the marker: what the wheels unpack to
    monkeypatch.setenv(cache.LIMIT_ENV, f"{2 * size + size // 2}B")  # room for two
    cache.release("0.9.0", wheels)
    os.utime(first.path / ".complete", (1, 1))  # used long ago...
    assert cache.release("0.8.1", wheels) == first  # ...and now again: the newest use
    cache.release("0.10.1", wheels)  # 0.9.0 is the one used longest ago
    assert [e.version for e in cache.entries()] == ["0.8.1", "0.10.1"]
    assert cache.cached("0.9.0") is None


def test_the_cache_command_lists_and_clears(
    tmp_path: Path, own_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.8.1")
    cache.release("0.8.1", wheels)
    assert main(["cache"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert str(own_cache / "releases") in out and "limit 4 GB" in out
    assert re.search(r"jaxlib 0\.8\.1 +0 MB +last used \d{4}-\d\d-\d\d", out), out
    assert out.rstrip().endswith("1 release, 0 MB")
    assert main(["cache", "--clear"]) == ExitCode.OK
    assert "removed 1 release (0 MB)" in capsys.readouterr().err
    assert cache.entries() == [] and not (own_cache / "releases").exists()


def test_a_bad_limit_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.LIMIT_ENV, "lots")
    with pytest.raises(BugkitError, match=f"{cache.LIMIT_ENV}: not a size: 'lots'"):
        cache.limit()
    assert main(["cache"]) == ExitCode.ERROR


@pytest.fixture
def python312(monkeypatch: pytest.MonkeyPatch) -> str:
    """An interpreter that says it is Python 3.12 (only its version is asked)."""
    monkeypatch.setattr(index, "_version_of", lambda python: "3.12")
    return "/opt/python3.12/bin/python3"


def test_releases_built_only_for_a_newer_python_are_tried_under_it(
    tmp_path: Path, python312: str
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.10.2")
    release_wheels(wheels, "0.12.0.1", tag="cp312", jax=False)
    wheel(wheels, "jax-0.12.0-py3-none-any.whl", {"jax/__init__.py": b""})  # patch release
    release_wheels(wheels, "0.13.0", tag="cp313")
    without = index.from_folder(wheels)
    assert without.tried == ("0.10.2",) and without.elsewhere == {}
    assert dict(without.untried)["0.12.0.1"].startswith("a cp312 wheel: give --python")
    found = index.from_folder(wheels, python312)
    assert found.tried == ("0.10.2", "0.12.0.1")
    assert found.elsewhere == {"0.12.0.1": python312}
    assert dict(found.untried)["0.13.0"] == "a cp313 wheel"
    assert found.between("0.11", None).elsewhere == {"0.12.0.1": python312}


def test_a_newer_pythons_release_comes_with_its_own_dependencies(
    tmp_path: Path, python312: str, own_cache: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.12.0", tag="cp312")
    machine = "manylinux_2_27_x86_64"
    for name in (
        f"numpy-2.4.0-cp312-cp312-{machine}.whl",
        f"numpy-2.5.5-cp312-cp312-{machine}.whl",  # the newest of each is taken
        f"numpy-2.5.5-cp311-cp311-{machine}.whl",  # this Python's: not for it
        f"ml_dtypes-0.7.0-cp312-cp312-{machine}.whl",
        "opt_einsum-3.4.0-py3-none-any.whl",
        f"protobuf-6.0.0-cp39-abi3-{machine}.whl",  # the stable ABI: any newer Python loads it
        "scipy-1.18.1-cp312-cp312-macosx_14_0_arm64.whl",  # another machine's
    ):
        dist = name.split("-")[0]
        wheel(wheels, name, {f"{dist}/__init__.py": name.encode()})
    chosen = [p.name for p in index.wheels_for(wheels, "0.12.0", python312)]
    assert chosen[:2] == [f"jaxlib-0.12.0-cp312-cp312-{machine}.whl", "jax-0.12.0-py3-none-any.whl"]
    assert sorted(chosen[2:]) == [
        f"ml_dtypes-0.7.0-cp312-cp312-{machine}.whl",
        f"numpy-2.5.5-cp312-cp312-{machine}.whl",
        "opt_einsum-3.4.0-py3-none-any.whl",
        f"protobuf-6.0.0-cp39-abi3-{machine}.whl",
    ]
    got = cache.release("0.12.0", wheels, python312)
    assert got.python == python312 and got.path.name.endswith("-cp312")
    assert (got.path / "numpy" / "__init__.py").read_text() == chosen[3]
    assert cache.cached("0.12.0") is None  # this Python's folder is another
    assert cache.cached("0.12.0", python312) == got


def test_a_release_before_numpy_2_comes_with_numpy_1_and_its_company(
    tmp_path: Path, own_cache: Path
) -> None:
    """jax 0.4.20 calls np.trapz (gone from numpy 2.4), and the ml_dtypes built for numpy 2
    fail to load under numpy 1: such a release brings its own, numpy below 2."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, "0.4.20")
    release_wheels(wheels, "0.8.1")
    machine = "manylinux_2_17_x86_64.manylinux2014_x86_64"
    for name in (
        f"numpy-1.26.4-{TAG}-{TAG}-{machine}.whl",
        f"numpy-2.4.6-{TAG}-{TAG}-{machine}.whl",  # newer, but numpy 2
        f"ml_dtypes-0.5.4-{TAG}-{TAG}-{machine}.whl",
        "opt_einsum-3.4.0-py3-none-any.whl",
    ):
        dist = name.split("-")[0]
        wheel(wheels, name, {f"{dist}/__init__.py": name.encode()})
    assert index.needs_numpy_1("0.4.29") and not index.needs_numpy_1("0.4.30")
    chosen = [p.name for p in index.wheels_for(wheels, "0.4.20")]
    assert sorted(chosen[2:]) == [
        f"ml_dtypes-0.5.4-{TAG}-{TAG}-{machine}.whl",
        f"numpy-1.26.4-{TAG}-{TAG}-{machine}.whl",
        "opt_einsum-3.4.0-py3-none-any.whl",
    ]
    got = cache.release("0.4.20", wheels)
    assert (got.path / "numpy" / "__init__.py").read_text().startswith("numpy-1.26.4-")
    # A release made for numpy 2 keeps this interpreter's.
    assert len(index.wheels_for(wheels, "0.8.1")) == 2


def test_a_wheels_requirements_leave_out_extras_and_markers(tmp_path: Path) -> None:
    meta = (
        "Metadata-Version: 2.1\nName: jax\nRequires-Dist: jaxlib<=0.12.0,>=0.11.2\n"
        "Requires-Dist: numpy>=2.2\nRequires-Dist: scipy >=1.15 ; python_version >= '3.12'\n"
        "Requires-Dist: jaxlib[cuda]==0.12.0; extra == 'cuda'\n"
    )
    path = wheel(
        tmp_path, "jax-0.12.0-py3-none-any.whl", {"jax-0.12.0.dist-info/METADATA": meta.encode()}
    )
    assert index.requirements(path) == ["jaxlib<=0.12.0,>=0.11.2", "numpy>=2.2", "scipy>=1.15"]


def test_another_interpreter_that_does_not_run_is_a_clear_error() -> None:
    with pytest.raises(BugkitError, match=r"--python /nonexistent/python3\.12: cannot run"):
        index.python_version("/nonexistent/python3.12")
