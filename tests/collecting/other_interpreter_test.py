"""xla-bugkit in a venv of its own, the program in another: the report names the program's
interpreter and versions, and with another jax the replay runs under the program's jaxlib.

The second test needs a second interpreter with a jaxlib other than this one's, named by
XLA_BUGKIT_OTHER_PYTHON (for example a venv with jax==0.10.1 and jaxlib==0.10.1 installed
from cached wheels); skipped without one, since making one downloads ~90 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.bundle.envinfo import HERE_NOTE, PYTHON_NOTE

OTHER = os.environ.get("XLA_BUGKIT_OTHER_PYTHON", "")

pytestmark = [pytest.mark.jax, pytest.mark.slow]


def venv_python(folder: Path) -> Path:
    """A venv's interpreter of its own, made in ``folder``, that imports this one's jax
    (a .pth names this interpreter's site-packages): another path, the same packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    python = folder / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "ours.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    return python


def test_the_programs_own_interpreter_is_reported(tmp_path: Path) -> None:
    python = venv_python(tmp_path / "venv")
    assert str(python) != sys.executable
    done = run_collect(tmp_path / "b.zip", [str(python), str(PROGRAMS / "compile_error.py")])
    assert done.returncode == 0, done.stderr
    report = done.text("environment.txt")
    assert f"python executable: {python}\n" in report, report
    assert PYTHON_NOTE not in report
    # jaxlib as the program imported it; what it never imported is this environment's.
    assert f"jaxlib:     {metadata.version('jaxlib')}\n" in report, report
    assert f"py7zr:      {metadata.version('py7zr')} {HERE_NOTE}\n" in report, report
    framework = done.manifest()["framework"]
    assert (framework["name"], framework["version_from"]) == ("jax", "the program")


@pytest.mark.skipif(not OTHER, reason="XLA_BUGKIT_OTHER_PYTHON names no interpreter")
def test_the_programs_own_jaxlib_is_reported_and_replays_it(tmp_path: Path) -> None:
    theirs = subprocess.run([OTHER, "-c", "import jaxlib; print(jaxlib.__version__)"],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    if theirs == metadata.version("jaxlib"):
        pytest.skip(f"{OTHER} has this interpreter's jaxlib {theirs}")
    done = run_collect(tmp_path / "b.zip", [OTHER, str(PROGRAMS / "compile_crash.py")])
    assert done.returncode == 0, done.stderr
    report = done.text("environment.txt")
    assert f"jaxlib:     {theirs}" in report
    replayed = done.manifest()["modules"][0]["replay"]
    assert replayed["outcome"] == "reproduced: crash"
    assert replayed["under"] == f"jaxlib {theirs} of the program's interpreter"
