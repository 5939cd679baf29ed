"""``xla-bugkit bundle WORKDIR``: bundles made again from the work dirs of real collect runs,
without running the program again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.replay_children import needs_proc, replay_children, tagged_env, wait_for_replay
from xla_bugkit.cli.main import main

pytestmark = pytest.mark.slow  # real jax programs, end to end

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


@dataclass(frozen=True)
class Kept:
    """A collect run whose work dir was kept."""

    workdir: Path
    first: Path  # the bundle collect wrote

    def files(self) -> list[str]:
        return sorted(p.relative_to(self.workdir).as_posix() for p in self.workdir.rglob("*"))


def manifest(bundle: Path) -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(bundle) as z:
        return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]


def manifest_of_tar(bundle: Path) -> dict:  # type: ignore[type-arg]
    with tarfile.open(bundle) as tf:
        member = tf.extractfile("manifest.json")
        assert member is not None
        return json.loads(member.read())  # type: ignore[no-any-return]


def keep_run(tmp: Path, program: str, *extra: str) -> Kept:
    work, first = tmp / f"{program}-run", tmp / f"{program}-first.zip"
    argv = [XLA_BUGKIT, "collect", "-q", "--keep-workdir", "--no-replay", "--workdir", str(work),
            "-o", str(first), *extra,
            "--", sys.executable, str(PROGRAMS / f"{program}.py")]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 3, done.stderr  # bundled, with no replay to prove it
    assert f"  work dir kept: {work} (a bundle from it again: xla-bugkit bundle {work} -o OUT)" in (
        done.stderr
    )
    return Kept(work, first)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bundle")


@pytest.fixture(scope="module")
def crash_run(tmp: Path) -> Kept:
    return keep_run(tmp, "compile_crash")


@pytest.fixture(scope="module")
def hang_run(tmp: Path) -> Kept:
    return keep_run(tmp, "compiled_hang", "--module", "jit_spin")


def test_the_kept_work_dir_holds_the_run_record(crash_run: Kept) -> None:
    record = json.loads((crash_run.workdir / "run.json").read_text())
    assert record["command"] == [sys.executable, str(PROGRAMS / "compile_crash.py")]
    assert record["failure"]["kind"] == "compile crash"
    assert record["failure"]["signal"] == "SIGABRT"
    assert record["exit_status"] == -6
    names = {p.name for p in crash_run.workdir.iterdir()}
    assert names == {"dump", "processes", "run.log", "run.json"}


def test_bundle_again_with_another_module(
    crash_run: Kept, tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = crash_run.files()
    out = tmp / "helper.zip"
    argv = ["bundle", str(crash_run.workdir), "-o", str(out), "--no-replay",
            "--module", r"\.jit_broadcast_in_dim$"]  # fmt: skip
    assert main(argv) == 3
    m = manifest(out)
    assert [x["name"] for x in m["modules"]] == ["jit_broadcast_in_dim"]
    assert m["modules"][0]["reasons"] == ["matches --module '\\\\.jit_broadcast_in_dim$'"]
    assert m["failure"]["site"] == "buffer_assignment_util.cc:46"
    assert m["command"] == manifest(crash_run.first)["command"]
    assert f"  bundle: {out} (" in capsys.readouterr().err
    assert crash_run.files() == before  # the work dir is read, never changed


def test_bundle_again_replays_from_the_work_dir(crash_run: Kept, tmp: Path) -> None:
    out = tmp / "replayed.zip"
    assert main(["bundle", "-q", str(crash_run.workdir), "-o", str(out)]) == 0
    (module,) = manifest(out)["modules"]
    assert module["name"] == "jit_add_noise"
    assert module["replay"]["outcome"] == "reproduced: crash"
    # An earlier bundle may be replaced; another file only with --force.
    assert main(["bundle", "-q", str(crash_run.workdir), "-o", str(out), "--no-replay"]) == 3
    assert manifest(out)["modules"][0]["replay"] is None


def test_bundle_never_replaces_a_file_that_is_not_a_bundle(
    crash_run: Kept, tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp / "notes.tar.gz"
    out.write_text("mine")
    assert main(["bundle", str(crash_run.workdir), "-o", str(out), "--no-replay"]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} exists and is not an xla-bugkit bundle: choose another "
        "output, or pass --force to replace it\n"
    )
    assert out.read_text() == "mine"
    assert main(["bundle", "-q", str(crash_run.workdir), "-o", str(out), "--no-replay",
                 "--force"]) == 3  # fmt: skip
    assert manifest_of_tar(out)["failure"]["kind"] == "compile crash"


@needs_proc
def test_a_second_ctrl_c_during_the_replay_aborts_and_leaves_nothing(
    hang_run: Kept, tmp: Path
) -> None:
    out_dir = tmp / "aborted"
    out_dir.mkdir()
    tag, env = tagged_env()
    argv = [XLA_BUGKIT, "bundle", "-q", str(hang_run.workdir), "-o", str(out_dir / "b.zip"),
            "--replay-timeout", "3600"]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env)  # fmt: skip
    assert child.stderr is not None
    wait_for_replay(tag, child)  # jit_spin never ends: the replay runs until stopped
    child.send_signal(signal.SIGINT)
    seen = []
    for line in child.stderr:
        seen.append(line)
        if line == "xla-bugkit: stopping the replay (Ctrl-C again to abort)\n":
            break
    child.send_signal(signal.SIGINT)
    rest = child.stderr.read()
    assert child.wait(timeout=600) == 130, "".join(seen) + rest
    assert rest.endswith("xla-bugkit: interrupted\n"), rest
    assert list(out_dir.iterdir()) == []  # neither the bundle nor a partial file
    assert not (hang_run.workdir / "bundle").exists()
    assert replay_children(tag) == []
