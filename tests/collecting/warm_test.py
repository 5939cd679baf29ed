"""What collect does once the program's main module has finished, while the program still
tears itself down: the saved arguments' snapshots, their redacted copies, hashes and packing,
which the stages after the run then find done (on a real jax program)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import clean_env
from xla_bugkit.archive import packing
from xla_bugkit.bundle.manifest.write import sha256_of
from xla_bugkit.collecting import running, warm, workdir
from xla_bugkit.collecting.options import CollectOptions
from xla_bugkit.run import arguments, evidence_files

pytestmark = pytest.mark.jax  # a real jax program

PROGRAM = """\
import jax, jax.numpy as jnp
w = jax.random.normal(jax.random.key(0), (512, 1024))  # 2 MB of weights

@jax.jit
def step(w):
    return w - 0.01 * jnp.tanh(w)

for _ in range(3):
    w = step(w)
print(float(w.sum()))
"""


def test_the_snapshot_and_its_redacted_copy_are_made_before_the_run_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    for name, value in clean_env().items():
        monkeypatch.setenv(name, value)
    command = [sys.executable, str(script)]
    work = tmp_path / "work"
    work.mkdir()
    run = running.run_program(command, work, CollectOptions(output=tmp_path / "b.7z"))
    assert run.exit_status == 0, run.output
    program = next(p for p in evidence_files.load(work) if p.ppid == os.getpid())
    folder = program.dump_dir or work / workdir.DUMP
    # Nothing after the run has written them yet: the main module's end did.
    snapshots = arguments.recorded_snapshots(folder, program)
    step = next(s for s in snapshots if ".jit_step." in s.name)
    assert step.stat().st_size > 2 << 20
    # Staging links the copy made then, which holds what redacting now would write.
    staged = tmp_path / "staged.pb"
    copied = warm.redactor(command, work).copy_binary(step, staged)
    ahead = [
        p for p in (work / workdir.REDACTED).iterdir() if p.stat().st_ino == staged.stat().st_ino
    ]
    assert len(ahead) == 1 and copied.left == ()
    # The same bytes as redacting a copy of the snapshot now, which nothing was made for.
    again = tmp_path / "again.pb"
    shutil.copyfile(step, again)
    fresh = tmp_path / "fresh.pb"
    warm.redactor(command, work).copy_binary(again, fresh)
    assert fresh.stat().st_ino != staged.stat().st_ino
    assert fresh.read_bytes() == staged.read_bytes()
    assert sha256_of(staged) == hashlib.sha256(staged.read_bytes()).hexdigest()
    assert packing.how_to_pack(staged, store=True) == packing.how_to_pack(fresh, store=True)
