"""libtpu's releases, listed from PyPI's JSON (a recorded excerpt) or a folder of wheels, and
unpacked into the cache; nothing here goes to the network."""

from __future__ import annotations

import copy
import json
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from xla_bugkit.errors import BugkitError
from xla_bugkit.releases import cache, index, libtpu

# PyPI's answer for https://pypi.org/pypi/libtpu/json (2026-12-06), cut to eight releases and
# the fields read or worth seeing: py3-none wheels up to 0.0.3x, one per CPython after; 0.0.43
# was published for Python 3.12 and newer only.
PYPI = Path(__file__).parent / "data" / "libtpu_pypi.json"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(autouse=True)
def as_cp311_on_x86(monkeypatch: pytest.MonkeyPatch) -> None:
    # The recorded answer's wheels are x86-64 ones; the choice of wheel is read as a
    # CPython 3.11 interpreter's, whatever runs the tests.
    monkeypatch.setattr(libtpu.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(libtpu, "python_tag", lambda: "cp311")


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PYPI.read_text("utf-8"))
    return data


def test_pypis_answer_lists_every_release_with_the_wheel_to_unpack() -> None:
    found = libtpu.parse_pypi(recorded())
    assert found.tried == ("0.0.1", "0.0.9", "0.0.17", "0.0.40", "0.0.42", "0.0.42.1",
                           "0.0.43", "0.0.52")  # fmt: skip
    assert found.untried == ()
    assert found.wheels["0.0.9"] == "libtpu-0.0.9-py3-none-manylinux_2_27_x86_64.whl"
    # This interpreter's own wheel where there is one, among six CPythons'.
    assert found.wheels["0.0.42.1"] == "libtpu-0.0.42.1-cp311-cp311-manylinux_2_31_x86_64.whl"
    # None for 3.11: another CPython's serves, its libtpu.so loaded through jaxlib all the same.
    assert found.wheels["0.0.43"] == "libtpu-0.0.43-cp312-cp312-manylinux_2_31_x86_64.whl"
    assert libtpu.wheel_python(found.wheels["0.0.43"]) == "3.12"
    assert libtpu.wheel_python(found.wheels["0.0.42.1"]) is None
    assert libtpu.wheel_python(found.wheels["0.0.9"]) is None
    assert found.between("0.0.40", "0.0.43").tried == ("0.0.40", "0.0.42", "0.0.42.1", "0.0.43")


def test_a_yanked_release_or_one_without_a_wheel_for_this_machine_is_named_not_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = recorded()
    # The recorded answer has none yanked: 0.0.40 is marked so here, as PyPI marks a file.
    for f in data["releases"]["0.0.40"]:
        f["yanked"], f["yanked_reason"] = True, "broken"
    data["releases"]["0.0.50rc1"] = copy.deepcopy(data["releases"]["0.0.52"])
    found = libtpu.parse_pypi(data)
    assert dict(found.untried) == {"0.0.40": "yanked"}
    assert "0.0.50rc1" not in found.tried  # a pre-release is not a release number
    monkeypatch.setattr(libtpu.platform, "machine", lambda: "aarch64")
    arm = libtpu.parse_pypi(recorded())
    assert arm.tried == ()
    assert set(dict(arm.untried).values()) == {"no aarch64 wheel"}


def test_an_answer_without_releases_is_an_error_not_an_empty_range() -> None:
    with pytest.raises(BugkitError, match="lists no releases"):
        libtpu.parse_pypi({"message": "Not Found"})


def test_the_index_read_through_a_url_and_without_one_says_what_to_pass(tmp_path: Path) -> None:
    found = libtpu.from_pypi(PYPI.resolve().as_uri())  # a file: URL, as PyPI answers it
    assert found.tried[-1] == "0.0.52"
    with pytest.raises(BugkitError) as raised:
        libtpu.from_pypi((tmp_path / "offline").as_uri())
    said = str(raised.value)
    assert said.startswith("cannot read libtpu's releases from file:")
    assert said.endswith("pip download --no-deps libtpu==V) and give --wheels DIR")


def test_the_jax_release_says_which_libtpu_it_was_made_with() -> None:
    # Requires-Dist lines as jax 0.10.2 and 0.4.38 wrote them.
    assert libtpu.paired(['jaxlib<=0.10.2,>=0.10.2; extra == "tpu"',
                          'libtpu==0.0.42.*; extra == "tpu"']) == "0.0.42.*"  # fmt: skip
    assert libtpu.paired(['libtpu==0.0.8; extra == "tpu"', "requests; extra == 'tpu'"]) == "0.0.8"
    assert libtpu.paired(["numpy>=1.26"]) is None
    installed = metadata.requires("jax") or []
    pins = [r for r in installed if r.startswith("libtpu")]
    assert libtpu.paired() == (pins[0].split("==")[1].split(";")[0].strip() if pins else None)


def libtpu_wheel(folder: Path, version: str, tag: str = "cp311", library: bool = True) -> Path:
    path = folder / f"libtpu-{version}-{tag}-{tag}-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("libtpu/__init__.py", "")
        if library:
            z.writestr("libtpu/libtpu.so", b"\x7fELF not really")
    return path


def test_a_folder_of_wheels_lists_its_releases_and_each_unpacks_once(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    libtpu_wheel(wheels, "0.0.42.1")
    libtpu_wheel(wheels, "0.0.43", tag="cp312")
    (wheels / "libtpu-0.0.44-cp312-cp312-manylinux_2_31_aarch64.whl").write_bytes(b"")
    (wheels / "notes.txt").write_text("not a wheel")
    found = libtpu.from_folder(wheels)
    assert found.tried == ("0.0.42.1", "0.0.43")
    assert dict(found.untried) == {"0.0.44": "no x86_64 wheel"}
    assert found.source == str(wheels)
    first = cache.compiler("0.0.43", found.wheels["0.0.43"], wheels)
    assert (first.dist, first.version) == ("libtpu", "0.0.43")
    assert first.library.read_bytes() == b"\x7fELF not really"
    assert first.library == cache.compiler_folder("libtpu", "0.0.43") / "libtpu" / "libtpu.so"
    (wheels / found.wheels["0.0.43"]).unlink()  # the cache serves it from now on
    assert cache.compiler("0.0.43", found.wheels["0.0.43"], wheels) == first
    held = {(e.dist, e.version, e.python_tag) for e in cache.entries()}
    assert held == {("libtpu", "0.0.43", "")}


def test_a_wheel_without_the_library_or_leaving_its_folder_is_refused(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    empty = libtpu_wheel(wheels, "0.0.40", library=False)
    with pytest.raises(BugkitError, match=r"holds no libtpu/libtpu\.so"):
        cache.compiler("0.0.40", empty.name, wheels)
    hostile = wheels / "libtpu-0.0.41-cp311-cp311-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(hostile, "w") as z:
        z.writestr("../libtpu.so", b"")
    with pytest.raises(BugkitError, match="leaves its folder"):
        cache.compiler("0.0.41", hostile.name, wheels)
    assert not (tmp_path / "cache" / "releases" / "libtpu.so").exists()
    assert cache.entries() == []  # neither is kept as a release


def test_a_missing_folder_is_said() -> None:
    with pytest.raises(BugkitError, match="not a folder"):
        libtpu.from_folder(Path("no-such-folder"))


def test_jaxlib_entries_keep_their_python_tag(tmp_path: Path) -> None:
    folder = cache.folder("0.10.2")
    folder.mkdir(parents=True)
    (folder / ".complete").write_text("0.10.2\n10\n")
    (entry,) = cache.entries()
    assert (entry.dist, entry.python_tag) == ("jaxlib", index.python_tag())
