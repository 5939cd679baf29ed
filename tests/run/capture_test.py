"""How a rerun keeps inputs on a bounded disk: the hook's first-call arguments by default,
XLA's snapshots of every execution pruned as they come with ``--snapshots every``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.choose.snapshot_test import NAN, loop
from xla_bugkit import frameworks
from xla_bugkit.hlo import flags
from xla_bugkit.run import hook, rerun
from xla_bugkit.run.capture import EVERY, FIRST, NEWEST_KEPT, Capture, Pruner
from xla_bugkit.run.evidence_files import read
from xla_bugkit.run.record import RunRecord

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


def snapshots(folder: Path, module: int, count: int, size: int = 100, start: int = 0) -> list[Path]:
    """``count`` snapshot files of one module, oldest first (mtimes one second apart)."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(count):
        path = folder / f"module_{module:04d}.jit_step.snapshot.{1000 + start + i}.pb"
        path.write_bytes(b"x" * size)
        os.utime(path, (1_000_000 + start + i, 1_000_000 + start + i))
        made.append(path)
    return made


def test_each_module_keeps_its_first_and_newest_snapshots(tmp_path: Path) -> None:
    step = snapshots(tmp_path / "123", 4, 10)
    helper = snapshots(tmp_path / "123", 1, 2, start=20)
    other_process = snapshots(tmp_path / "456", 4, 1, start=40)
    (tmp_path / "123" / "module_0004.jit_step.before_optimizations.txt").write_text("HloModule")
    pruner = Pruner(tmp_path, budget=10**9)
    pruner.prune()
    kept = sorted(p for p in tmp_path.rglob("*.pb"))
    assert kept == sorted([step[0], *step[-NEWEST_KEPT:], *helper, *other_process])
    assert (pruner.removed, pruner.removed_bytes) == (10 - 1 - NEWEST_KEPT, 700)
    assert (tmp_path / "123" / "module_0004.jit_step.before_optimizations.txt").exists()


def test_over_the_budget_the_oldest_go_first_and_each_modules_newest_stays(
    tmp_path: Path,
) -> None:
    step = snapshots(tmp_path, 4, 3, size=1000)
    helper = snapshots(tmp_path, 1, 1, size=1000, start=10)
    Pruner(tmp_path, budget=2500).prune()
    # 4000 bytes: step's first (the oldest) goes, then its older newest; both newest stay.
    assert sorted(tmp_path.iterdir()) == sorted([step[-1], helper[0]])


def test_a_module_keeps_the_snapshot_that_made_the_first_nan(tmp_path: Path) -> None:
    """A loop feeds a NaN back into every later step: the step whose result first held it
    is kept beside the first and the newest, and no later one."""
    values = [(1, 2), (2, 3), (NAN, NAN), (NAN, NAN), (NAN, NAN), (NAN, NAN), (NAN, NAN)]
    made = loop(tmp_path, values, "module_0004.jit_step")
    pruner = Pruner(tmp_path, budget=10**9)
    pruner.prune()
    pruner.prune()  # a later look keeps it still
    assert sorted(tmp_path.iterdir()) == sorted([made[0], made[2], *made[-NEWEST_KEPT:]])
    assert pruner.removed == len(values) - 2 - NEWEST_KEPT
    # A module whose results held NaN from the first on keeps no such step.
    loop(tmp_path / "normal", [(1, NAN)] * 5, "module_0006.jit_masked")
    pruner.prune()
    assert len(list((tmp_path / "normal").iterdir())) == 1 + NEWEST_KEPT


def test_the_pruner_runs_while_a_program_writes(tmp_path: Path) -> None:
    with Pruner(tmp_path, budget=10**9, interval=0.01) as pruner:
        snapshots(tmp_path, 4, 6)
    # Leaving the block prunes once more: whatever the thread saw, the rule holds after.
    assert len(list(tmp_path.iterdir())) == 1 + NEWEST_KEPT
    assert pruner.removed == 6 - 1 - NEWEST_KEPT


def test_by_default_xla_writes_no_snapshots_and_the_hook_keeps_first_arguments(
    tmp_path: Path,
) -> None:
    env, merged = rerun.child_env({}, tmp_path / "dump", tmp_path / "processes")
    assert flags.SNAPSHOTS not in merged.flags
    assert env[hook.ENV_FIRST_ARGUMENTS] == "1"
    assert env[hook.ENV_ARGS_BUDGET] == str(Capture().budget)
    every = Capture(EVERY, 5 * 10**8)
    env, merged = rerun.child_env({}, tmp_path / "dump", tmp_path / "processes", None, every)
    assert flags.SNAPSHOTS in merged.flags
    assert hook.ENV_FIRST_ARGUMENTS not in env and env[hook.ENV_ARGS_BUDGET] == "500000000"
    # No hook (start_capture), or PyTorch/XLA (the hook sees none of its calls): XLA's.
    _, merged = rerun.child_env({}, tmp_path / "dump")
    assert flags.SNAPSHOTS in merged.flags
    ptxla = frameworks.Framework.PYTORCH_XLA
    _, merged = rerun.child_env({}, tmp_path / "dump", tmp_path / "processes", ptxla)
    assert flags.SNAPSHOTS in merged.flags


def test_the_summary_says_what_is_kept_and_the_bound() -> None:
    assert "first call (at most 2 GB)" in Capture(FIRST).describe()
    assert "--snapshots every" in Capture(FIRST).describe()
    assert "first and newest 2 kept (at most 0.5 GB)" in Capture(EVERY, 5 * 10**8).describe()


def rerun_program(tmp_path: Path, source: str) -> RunRecord:
    """``source`` run as collect reruns a program, with its dumps and records in ``tmp_path``."""
    program = tmp_path / "program.py"
    program.write_text(source)
    return rerun.rerun(
        [sys.executable, str(program)],
        dump_dir=tmp_path / "dump",
        log_path=tmp_path / "run.log",
        ending=rerun.Ending(600),
        echo=False,
    )


LOOP = """
import jax, jax.numpy as jnp
@jax.jit
def step(w, x):
    return w - 0.1 * jnp.tanh(w @ w), (x @ w).sum()
w, x = jnp.ones((8, 8)), jnp.ones((4, 8))
for _ in range(50):
    w, loss = step(w, x)
print("done", float(loss))
"""


@pytest.mark.jax
def test_a_loop_saves_its_functions_first_arguments_once_whatever_its_length(
    tmp_path: Path,
) -> None:
    record = rerun_program(tmp_path, LOOP)
    assert record.exit_status == 0, record.output
    assert not list((tmp_path / "dump").rglob("*.snapshot.*.pb"))  # XLA wrote none
    (process,) = read(tmp_path / "processes")
    steps = [e for e in process.events if e.module == "jit_step" and e.kind == "execute"]
    # Fifty calls; the first alone came through Python, and its arguments were saved.
    assert len(steps) == 1 and steps[0].args is not None
    assert steps[0].args.exists()


@pytest.mark.jax
def test_collect_every_keeps_the_disk_bounded(tmp_path: Path) -> None:
    program = tmp_path / "loop.py"
    program.write_text(LOOP)
    work = tmp_path / "work"
    done = subprocess.run(
        [XLA_BUGKIT, "collect", "--always", "--no-replay", "--snapshots", "every",
         "--keep-workdir", "--workdir", str(work), "-o", str(tmp_path / "b.zip"), "--",
         sys.executable, str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 5, done.stderr  # bundled with --always: no failure seen
    step = list(work.rglob("module_*.jit_step.snapshot.*.pb"))
    assert 1 <= len(step) <= 1 + NEWEST_KEPT  # of 50 executions
    assert "older XLA snapshots removed while the program ran" in done.stderr


@pytest.mark.jax
@pytest.mark.slow
def test_a_wrong_result_only_later_values_show_runs_the_program_again_with_every_snapshot(
    tmp_path: Path,
) -> None:
    """A replay buffer whose jitted priorities go wrong (jax-ml/jax#39103) only once it has
    wrapped, at the 300th call: the first call's inputs compute the right values."""
    shape = Path(__file__).resolve().parents[1] / "programs" / "shapes" / "fast_path_wrong"
    out = tmp_path / "b.zip"
    done = subprocess.run(
        [XLA_BUGKIT, "collect", "-o", str(out), "--", sys.executable, "replay_buffer.py"],
        capture_output=True, text=True, timeout=1200, cwd=shape,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "running the program again with XLA's snapshot of every execution" in done.stderr
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
    first = manifest["modules"][0]
    assert first["name"] == "jit_priorities"
    assert first["replay"]["outcome"] == "reproduced: wrong result"
    # Asked for by name, the first inputs are all there is: no second run.
    again = subprocess.run(
        [XLA_BUGKIT, "collect", "--snapshots", "first", "-o", str(tmp_path / "c.zip"), "--",
         sys.executable, "replay_buffer.py"],
        capture_output=True, text=True, timeout=1200, cwd=shape,
    )  # fmt: skip
    assert again.returncode == 3, again.stderr
    assert "running the program again" not in again.stderr


@pytest.mark.jax
@pytest.mark.slow
def test_a_nan_fed_back_into_later_steps_is_replayed_where_it_was_made(tmp_path: Path) -> None:
    """The program's own fast-math flags let a NaN through its mask at step 24 and every
    later step inherits it: the newest inputs show only NaN staying NaN, so the replay runs
    on the step whose result first held one."""
    shape = Path(__file__).resolve().parents[1] / "programs" / "shapes" / "masked_nan_onset"
    out = tmp_path / "b.zip"
    done = subprocess.run(
        [XLA_BUGKIT, "collect", "--snapshots", "every", "-o", str(out), "--",
         sys.executable, "fit_gauges.py"],
        capture_output=True, text=True, timeout=1200, cwd=shape,
    )  # fmt: skip
    # Reproduced, and allowed by the program's own fast-math flags: 3, not XLA's bug.
    assert done.returncode == 3, done.stderr
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
    first = manifest["modules"][0]
    assert first["name"] == "jit_fit_step"
    assert first["replay"]["outcome"] == "reproduced: wrong result"
    assert any("replayed on the execution whose result first held a NaN" in n
               for n in manifest["notes"])  # fmt: skip
    assert "without them its result agrees with its references" in done.stderr


FAILED_ARGUMENT = """
import jax, jax.numpy as jnp, numpy as np

@jax.jit
def similarity(emb):
    return emb @ emb.T  # 4 TiB: XLA cannot allocate it, and says so when the result is read

try:
    scores = similarity(jnp.ones((1 << 20, 16)))
    print(np.asarray(scores[:8]).sum())  # slicing is a first call whose argument is broken
except Exception as e:
    print("caught", type(e).__name__, flush=True)
    raise SystemExit(3)
"""


@pytest.mark.jax
def test_saving_an_argument_xla_failed_to_produce_leaves_the_program_as_it_was(
    tmp_path: Path,
) -> None:
    # The first call of mean() takes a result XLA could not allocate: reading it would abort
    # the process (raw_buffer.h: buffer_.IsConcrete()), where the program gets an exception.
    record = rerun_program(tmp_path, FAILED_ARGUMENT)
    assert record.exit_status == 3, record.output
    assert "caught" in record.output
