"""xla-bugkit in a venv of its own, the program in another with another jax: the report gives
the program's versions and the replay runs under the program's jaxlib.

Needs a second interpreter with a jaxlib other than this one's, named by
XLA_BUGKIT_OTHER_PYTHON (for example a venv with jax==0.10.1 and jaxlib==0.10.1 installed
from cached wheels); skipped without one, since making one downloads ~90 MB.
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from helpers.programs import PROGRAMS, run_collect

OTHER = os.environ.get("XLA_BUGKIT_OTHER_PYTHON", "")

pytestmark = [
    pytest.mark.jax,
    pytest.mark.slow,
    pytest.mark.skipif(not OTHER, reason="XLA_BUGKIT_OTHER_PYTHON names no interpreter"),
]


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
