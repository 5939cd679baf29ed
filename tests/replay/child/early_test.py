"""A TPU module's references started beside its test (``child.early``), tried on the CPU with
the CPU's row made to take the TPU's references (the op-by-op one on the CPU, the module
at HIGHEST): on the real wrong result of jax#39103, the same arrays to the bit as the
references made after the test, and the conservative executable compiled beside the test
is the one run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit.choose import dumps
from xla_bugkit.replay import protocol
from xla_bugkit.replay.inputs import module_files, replay_input
from xla_bugkit.replay.spawn import child_spec, split_flags

pytestmark = pytest.mark.jax

# The worker run on one spec, the CPU's row taking the TPU's references; it says whether the
# conservative reference ran the executable compiled early.
DRIVER = textwrap.dedent(
    """
    import dataclasses, sys
    from xla_bugkit import platforms
    from xla_bugkit.replay.child import early, worker

    found = platforms.find
    cpu = dataclasses.replace(found("cpu"), cpu_reference=True)
    platforms.find = lambda name: cpu if name == "cpu" else found(name)
    take = early.Early.take

    def taken(self, chosen):
        exe = take(self, chosen)
        print("EARLY_EXECUTABLE_TAKEN", exe is not None, flush=True)
        return exe

    early.Early.take = taken
    worker.run_and_exit(lambda: worker.main([sys.argv[1]]))
    """
)


def _replayed(tmp_path: Path, runs: ProgramRuns, name: str, *, early: bool) -> tuple[Path, str]:
    source = runs["wrong_result"].dump_dir
    module = [m for m in dumps.index(source).modules if m.name == "jit_f"][-1]
    inp = replay_input(module.label, module_files(source, module), module.platform)
    assert inp is not None
    out = tmp_path / name
    out.mkdir()
    spec = {**child_spec(inp, out), "flags": split_flags(inp)[1]}
    spec[protocol.EARLY_REFERENCES] = early
    (tmp_path / f"{name}.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / f"{name}.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_references_started_beside_the_test_are_the_references_made_after_it(
    tmp_path: Path, program_runs: ProgramRuns
) -> None:
    after, said_after = _replayed(tmp_path, program_runs, "after", early=False)
    beside, said_beside = _replayed(tmp_path, program_runs, "beside", early=True)
    assert "EARLY_EXECUTABLE_TAKEN True" in said_beside, said_beside
    assert "EARLY_EXECUTABLE_TAKEN" not in said_after
    for stem in (protocol.TEST, protocol.OPBYOP, protocol.CONSERVATIVE):
        first = protocol.load_arrays(protocol.arrays_path(after, stem))
        second = protocol.load_arrays(protocol.arrays_path(beside, stem))
        assert [a.tobytes() for a in first] == [b.tobytes() for b in second], stem
    # The bug is there to be found: the test differs from both references, which agree.
    (test,) = protocol.load_arrays(protocol.arrays_path(beside, protocol.TEST))
    (opbyop,) = protocol.load_arrays(protocol.arrays_path(beside, protocol.OPBYOP))
    assert not np.array_equal(test, opbyop)
    assert not list(beside.glob("*.error"))
