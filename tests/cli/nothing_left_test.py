"""Nothing left behind: the temp folder is as it was after every command, however it ends.

Each command is the installed ``xla-bugkit``, run as a user runs it, with TMPDIR a fresh
folder of the test's own; the folder is listed before and after. The bundle is a real
collect of a real compile error (tests/programs/compile_error.py).

``verify --jaxlib X --python P`` replays under a release unpacked from a folder of wheels
(XLA_BUGKIT_WHEELS, as tests/cli/commands/bisect_test.py takes it): never downloaded, so skipped
without one. ``merge`` joins two parts that ``collect --job-part`` wrote of one program.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, clean_env, wait_for_child
from tests.helpers.replay_children import TAG, needs_proc, wait_for_replay

pytestmark = [pytest.mark.jax, pytest.mark.slow]

WHEELS = os.environ.get("XLA_BUGKIT_WHEELS")
WAIT = """\
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(3600)
"""


class Commands:
    """The installed command, each run with its own empty TMPDIR, checked empty after."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.n = 0

    def tmpdir(self) -> Path:
        self.n += 1
        folder = self.root / f"tmp-{self.n}"
        folder.mkdir()
        return folder

    def env(self, tmp: Path, tag: str = "") -> dict[str, str]:
        return {**clean_env(), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(self.root / "cache"),
                TAG: tag}  # fmt: skip

    def run(self, *argv: str, codes: tuple[int, ...] = (0,)) -> str:
        tmp = self.tmpdir()
        done = subprocess.run([XLA_BUGKIT, *argv], capture_output=True, text=True,
                              env=self.env(tmp), cwd=self.root, timeout=READY_TIMEOUT)  # fmt: skip
        assert done.returncode in codes, done.stderr
        assert sorted(p.name for p in tmp.iterdir()) == [], argv
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def commands(tmp_path_factory: pytest.TempPathFactory) -> Commands:
    return Commands(tmp_path_factory.mktemp("nothing-left"))


@pytest.fixture(scope="module")
def bundle(commands: Commands) -> Path:
    out = commands.root / "compile_error.zip"
    commands.run("collect", "-q", "-o", str(out), "--",
                 sys.executable, str(PROGRAMS / "compile_error.py"))  # fmt: skip
    return out


def test_collect_of_a_failing_program(bundle: Path) -> None:
    assert bundle.exists()


def test_collect_of_a_program_that_succeeds(commands: Commands) -> None:
    out = commands.root / "success.zip"
    commands.run("collect", "-q", "-o", str(out), "--", sys.executable,
                 str(PROGRAMS / "success.py"), codes=(5,))  # fmt: skip


def test_collect_interrupted(commands: Commands) -> None:
    script, ready = commands.root / "wait.py", commands.root / "wait.ready"
    script.write_text(WAIT)
    tmp = commands.tmpdir()
    argv = [XLA_BUGKIT, "collect", "-q", "-o", str(commands.root / "wait.zip"), "--",
            sys.executable, str(script), str(ready)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=commands.env(tmp))  # fmt: skip
    try:
        wait_for_child(ready, child)
    finally:
        child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=READY_TIMEOUT)
    assert child.returncode == 130, err
    assert sorted(p.name for p in tmp.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "-q", "{bundle}"],
        ["show", "{bundle}"],
        ["repack", "{bundle}", "{root}/repacked.7z"],
        ["replay", "{unpacked}"],
        ["shrink", "-q", "--budget", "20s", "-o", "{root}/shrunk.zip", "{bundle}"],
    ],
    ids=lambda argv: argv[0],
)
def test_each_command_on_the_bundle(commands: Commands, bundle: Path, argv: list[str]) -> None:
    unpacked = commands.root / "unpacked"
    if not unpacked.exists():
        with zipfile.ZipFile(bundle) as z:
            z.extractall(unpacked)
    filled = [a.format(bundle=bundle, root=commands.root, unpacked=unpacked) for a in argv]
    # shrink: 3 when the budget ends before the shrunk module is proven; still nothing left.
    commands.run(*filled, codes=(0, 3))


def test_convert_of_a_bundled_module(commands: Commands, bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as z:
        name = next(n for n in z.namelist() if n.endswith(".hlo.pb"))
        module = commands.root / "module.hlo.pb"
        module.write_bytes(z.read(name))
    commands.run("convert", str(module), str(commands.root / "module.txt"), "--to", "hlo")


def _venv_python(folder: Path) -> Path:
    """A venv's own interpreter that imports this one's packages: another ``--python``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    python = folder / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "ours.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


@pytest.mark.skipif(not WHEELS, reason="XLA_BUGKIT_WHEELS names no folder of jaxlib wheels")
def test_verify_under_another_release_and_interpreter(commands: Commands, bundle: Path) -> None:
    assert WHEELS is not None
    python = _venv_python(commands.root / "venv")
    release = metadata.version("jaxlib")  # in the folder of wheels, or the test skips
    if not any(Path(WHEELS).glob(f"jaxlib-{release}-*.whl")):
        pytest.skip(f"no jaxlib {release} wheel in XLA_BUGKIT_WHEELS")
    said = commands.run("verify", "-q", str(bundle), "--jaxlib", release,
                        "--wheels", WHEELS, "--python", str(python))  # fmt: skip
    assert f"under jaxlib {release}" in said


@needs_proc
def test_verify_interrupted_during_its_replay(commands: Commands) -> None:
    """A module that never ends (tests/programs/compiled_hang.py): verify is stopped with
    Ctrl-C once its replay child runs it."""
    hang = commands.root / "hang.zip"
    commands.run("collect", "-q", "--no-replay", "--module", "jit_spin", "-o", str(hang), "--",
                 sys.executable, str(PROGRAMS / "compiled_hang.py"), codes=(3,))  # fmt: skip
    tmp, tag = commands.tmpdir(), uuid.uuid4().hex
    child = subprocess.Popen([XLA_BUGKIT, "verify", "-q", "--timeout", "3600", str(hang)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=commands.env(tmp, tag))  # fmt: skip
    try:
        wait_for_replay(tag, child)
    finally:
        child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=READY_TIMEOUT)
    assert child.returncode == 130, err
    assert sorted(p.name for p in tmp.iterdir()) == []


def test_merge_of_two_parts(commands: Commands) -> None:
    job = commands.root / "job"
    job.mkdir()
    for part in ("0/2", "1/2"):
        commands.run("collect", "-q", "--job-part", part, "-o", str(job / "bundle.zip"), "--",
                     sys.executable, str(PROGRAMS / "compile_error.py"))  # fmt: skip
    parts = sorted(str(p) for p in job.glob("bundle.part-*-of-2.zip"))
    assert len(parts) == 2
    commands.run("merge", "-q", "-o", str(commands.root / "merged.zip"), *parts)
    assert (commands.root / "merged.zip").exists()
