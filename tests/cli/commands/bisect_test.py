"""``xla-bugkit bisect`` and ``verify --jaxlib`` on a real bundle of a real XLA crash.

The default tier bisects over the release installed here alone (no download). With
``XLA_BUGKIT_WHEELS`` naming a folder of real jaxlib and jax wheels (``pip download --no-deps
jaxlib==V jax==V``), the bundle is bisected over those releases too. With
``XLA_BUGKIT_NEWER_PYTHON`` (a newer interpreter, such as python3.12) and
``XLA_BUGKIT_NEWER_WHEELS`` (``pip download --python-version 3.12 --only-binary=:all:
jaxlib==V numpy ml_dtypes scipy opt_einsum`` and ``--no-deps jax==V``), a release built only
for that Python is verified under it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from xla_bugkit.jaxlib_adapter import jaxlib_version
from xla_bugkit.releases import cache
from xla_bugkit.releases.index import from_folder, key

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))
WHEELS = os.environ.get("XLA_BUGKIT_WHEELS")
NEWER_PYTHON = os.environ.get("XLA_BUGKIT_NEWER_PYTHON")
NEWER_WHEELS = os.environ.get("XLA_BUGKIT_NEWER_WHEELS")


def xla_bugkit(*argv: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", cache.CACHE_ENV: str(cache_dir)}
    return subprocess.run([XLA_BUGKIT, *argv], capture_output=True, text=True, timeout=1800,
                          env=env)  # fmt: skip


@pytest.fixture(scope="module")
def crash_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle of a real compile crash (a CHECK in buffer assignment, under a flag
    every release since 0.4.30 has)."""
    folder = tmp_path_factory.mktemp("bisect")
    out = folder / "bug.zip"
    done = xla_bugkit("collect", "-q", "-o", str(out), "--", sys.executable,
                      str(PROGRAMS / "compile_crash.py"), cache_dir=folder / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.jax
def test_bisect_over_the_installed_release_writes_its_answer_into_a_new_bundle(
    crash_bundle: Path, tmp_path: Path
) -> None:
    before = hashlib.sha256(crash_bundle.read_bytes()).hexdigest()
    empty = tmp_path / "wheels"
    empty.mkdir()
    out = tmp_path / "bug.bisected.zip"
    done = xla_bugkit("bisect", str(crash_bundle), "--wheels", str(empty), "-o", str(out),
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    installed = jaxlib_version()
    assert f"jaxlib {installed} (the reporter's): fails: compile crash (SIGABRT)" in done.stdout
    assert f"fails on every release tried (jaxlib {installed})" in done.stdout
    assert hashlib.sha256(crash_bundle.read_bytes()).hexdigest() == before  # untouched
    assert not (tmp_path / "cache").exists()  # the installed release needs no copy
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
        report = z.read("ISSUE.md").decode()
        record = json.loads(z.read("bisect.json"))
    assert manifest["bisect"] == record
    assert record["probes"][0]["version"] == installed
    assert record["probes"][0]["seen"] == "fails"
    assert "#### Across jaxlib releases" in report
    assert f"**fails on every release tried (jaxlib {installed})**" in report
    assert "xla-bugkit verify bug.bisected.zip" in report and "bug.zip" not in report
    # The new bundle is whole, and a second bisect replaces its section, not adds one.
    again = tmp_path / "again.zip"
    done = xla_bugkit("bisect", str(out), "--wheels", str(empty), "-o", str(again), "--json",
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"] == record["summary"]
    with zipfile.ZipFile(again) as z:
        assert z.read("ISSUE.md").decode().count("#### Across jaxlib releases") == 1


@pytest.mark.jax
def test_a_range_with_no_release_is_a_clear_error(crash_bundle: Path, tmp_path: Path) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    done = xla_bugkit("bisect", str(crash_bundle), "--wheels", str(empty), "--to", "0.6.2",
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("xla-bugkit: error: no jaxlib release from the oldest to 0.6.2")
    assert "Traceback" not in done.stderr


needs_wheels = pytest.mark.skipif(
    not WHEELS, reason="XLA_BUGKIT_WHEELS names no folder of jaxlib/jax wheels"
)


@pytest.mark.jax
@needs_wheels
def test_bisect_over_real_releases(crash_bundle: Path, tmp_path: Path) -> None:
    assert WHEELS is not None
    listed = from_folder(Path(WHEELS)).with_installed(jaxlib_version())
    done = xla_bugkit("bisect", str(crash_bundle), "--wheels", WHEELS, "--json",
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    tried = {p["version"]: p["seen"] for p in record["probes"]}
    # The ends of the range fail the same way: the CHECK has been there since 0.4.30.
    assert tried[listed.tried[0]] == tried[listed.tried[-1]] == "fails"
    assert record["summary"].startswith("fails on every release tried")


@pytest.mark.jax
@needs_wheels
def test_verify_under_another_release(crash_bundle: Path, tmp_path: Path) -> None:
    assert WHEELS is not None
    oldest = from_folder(Path(WHEELS)).tried[0]
    done = xla_bugkit("verify", str(crash_bundle), "--jaxlib", oldest, "--wheels", WHEELS,
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reproduced: crash under jaxlib {oldest}" in done.stdout
    if key(oldest) < (0, 6):  # it cannot read the proto: the text the installed jaxlib printed
        assert "replayed from its metadata-free text" in done.stdout


@pytest.mark.jax
def test_collect_bisect_puts_the_answer_in_the_bundle_it_writes(tmp_path: Path) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    out = tmp_path / "bug.zip"
    done = xla_bugkit("collect", "-q", "--bisect", "--wheels", str(empty), "-o", str(out),
                      "--", sys.executable, str(PROGRAMS / "compile_crash.py"),
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Asked for, so said even with -q: once, in the summary.
    assert done.stderr.count("across releases: fails on every release tried") == 1
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
        report = z.read("ISSUE.md").decode()
    assert manifest["bisect"]["probes"][0]["seen"] == "fails"
    assert "xla-bugkit verify bug.zip" in report  # not the partial file's name
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.jax
@pytest.mark.slow
@needs_wheels
@pytest.mark.parametrize(
    "program",
    [
        "ynn_regression_crash.py",  # jax-ml/jax#39257: a crash on 0.10.2
        "ynn_regression_wrong.py",  # jax-ml/jax#39103: a wrong result on 0.10.2
    ],
)
def test_a_real_regression_is_placed_between_the_two_releases(tmp_path: Path, program: str) -> None:
    """Correct on jaxlib 0.10.1, failing on 0.10.2 (installed here)."""
    assert WHEELS is not None
    listed = from_folder(Path(WHEELS))
    if "0.10.1" not in listed.tried or jaxlib_version() != "0.10.2":
        pytest.skip("needs jaxlib 0.10.2 installed and the 0.10.1 wheels in XLA_BUGKIT_WHEELS")
    out = tmp_path / "bug.zip"
    done = xla_bugkit("collect", "-q", "--bisect", "--wheels", WHEELS, "--timeout", "10m",
                      "-o", str(out), "--", sys.executable,
                      str(PROGRAMS / program),
                      cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        record = json.loads(z.read("bisect.json"))
    assert record["summary"] == (
        "regression between jaxlib 0.10.1 and 0.10.2: passes on 0.10.1, still fails on 0.10.2"
    )
    seen = {p["version"]: p["seen"] for p in record["probes"]}
    assert seen["0.10.2"] == "fails" and seen["0.10.1"] == "passes"


@pytest.mark.jax
@pytest.mark.skipif(
    not (NEWER_PYTHON and NEWER_WHEELS),
    reason="XLA_BUGKIT_NEWER_PYTHON and XLA_BUGKIT_NEWER_WHEELS name no newer Python and wheels",
)
def test_a_release_built_only_for_a_newer_python_is_verified_under_it(
    crash_bundle: Path, tmp_path: Path
) -> None:
    assert NEWER_PYTHON is not None and NEWER_WHEELS is not None
    listed = from_folder(Path(NEWER_WHEELS), NEWER_PYTHON)
    newest = max(listed.elsewhere, key=lambda v: tuple(map(int, v.split("."))))
    done = xla_bugkit("verify", str(crash_bundle), "--jaxlib", newest, "--python", NEWER_PYTHON,
                      "--wheels", NEWER_WHEELS, "--json", cache_dir=tmp_path / "cache")  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    (module,) = json.loads(done.stdout)["modules"]
    # It ran there: XLA compiled the module and crashed, the recorded way or another.
    assert module["verdict"]["under"] == f"jaxlib {newest}", module
    assert "compile crash (SIGABRT)" in module["verdict"]["evidence"], module
    unpacked = next((tmp_path / "cache" / "releases").glob(f"jaxlib-{newest}-cp3*"))
    assert (unpacked / "numpy").is_dir() and (unpacked / "ml_dtypes").is_dir()
