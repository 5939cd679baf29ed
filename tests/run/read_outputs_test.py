"""An error the program meets when it reads a call's outputs is that call's error.

jax dispatches asynchronously: an execution whose output XLA could not allocate returns
from dispatch, and the error surfaces at ``block_until_ready()`` or ``np.asarray(out)``. A
program that catches it there and exits with its own message failed in XLA all the same, and
a replay that raises the same status reproduces it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, hooked_env, run, run_collect
from xla_bugkit.cli.main import main
from xla_bugkit.run import evidence_files, hook

OOM = "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 2784000000 bytes."


def _write(work: Path, *records: dict[str, object]) -> None:
    folder = work / evidence_files.PROCESSES
    folder.mkdir(parents=True)
    start = {"e": "start", "t": 1.0, "pid": 7, "ppid": 1, "argv": ["x.py"], "cwd": "/"}
    lines = [json.dumps(r) for r in (start, *records)]
    (folder / "7.jsonl").write_text("\n".join(lines) + "\n")


def test_outputs_that_failed_after_dispatch_returned_carry_the_calls_error(
    tmp_path: Path,
) -> None:
    """The watcher's ``ready`` record, written once the outputs are computed, says the
    error computing them raised: the call ended by raising it, however its dispatch ended."""
    _write(
        tmp_path,
        {"e": "execute", "t": 2.0, "n": 6, "module": "jit_build_table"},
        {"e": "executed", "t": 2.1, "n": 6, "pending": True},
        {"e": "ready", "t": 2.2, "n": 6, "error": OOM},
        {"e": "exit", "t": 2.3, "status": 3, "how": "sys.exit"},
    )
    (p,) = evidence_files.load(tmp_path)
    (call,) = p.events
    assert call.finished and not call.on_device
    assert call.error == OOM


def test_outputs_computed_without_an_error_carry_none(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {"e": "execute", "t": 2.0, "n": 6, "module": "jit_build_table"},
        {"e": "executed", "t": 2.1, "n": 6, "pending": True},
        {"e": "ready", "t": 2.2, "n": 6},
    )
    (p,) = evidence_files.load(tmp_path)
    assert p.events[0].finished and p.events[0].error is None


@pytest.mark.jax
@pytest.mark.slow
@pytest.mark.parametrize("how", ["", "in-a-function"])
def test_a_caught_out_of_memory_read_from_the_outputs_reproduces_as_out_of_memory(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tests/programs/caught_oom.py caps its memory, meets XLA's RESOURCE_EXHAUSTED at
    ``block_until_ready()``, says so in its own words and exits 3. Before, the hook took the
    failed outputs for ready, the run for a non-XLA failure, and the replay's identical
    status for a failure of another kind ("not reproduced"). ``in-a-function``: the failed
    output dropped as sys.exit unwinds, and jax's INFO line quoting a status (its probe for
    a TPU) under the program's own logging, which was taken for the failure."""
    program = [sys.executable, str(PROGRAMS / "caught_oom.py"), *([how] if how else [])]
    c = run_collect(tmp_path / "b.zip", program)
    # Reproduced, and larger than the memory the program left itself: not XLA's bug.
    assert c.returncode == 3, c.stderr
    assert c.manifest()["blame"]["whose"] == "not xla", c.stderr
    failure = c.manifest()["failure"]
    assert failure["kind"] == "runtime error", failure
    assert failure["status_code"] == "RESOURCE_EXHAUSTED"
    assert failure["headline"] == "RESOURCE_EXHAUSTED: Out of memory allocating 2784000000 bytes."
    assert failure["executing"] == "build_table"
    # What it rests on: the process's record, and the program's own last words.
    assert "recorded that XLA raised while running jit(build_table)" in failure["evidence"]
    assert "lookup table build failed: not enough memory for 696M rows" in failure["evidence"]
    assert "libtpu" not in c.stderr.split("xla-bugkit:", 1)[-1]
    (module,) = [m for m in c.manifest()["modules"] if "build_table" in m["label"]]
    assert module["replay"]["outcome"] == "reproduced: error", module["replay"]
    # Reproduced, and still no XLA bug: the allocation alone is over the program's own cap.
    assert "this does not look like an XLA bug: XLA could not allocate 2,784,000,000 bytes" in (
        c.stderr
    )
    assert "address-space cap (RLIMIT_AS) the program set itself" in c.stderr

    # The maintainer's side: the replay under the same cap raises the same status.
    assert main(["verify", "--json", str(c.bundle)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reproduced"]
    assert result["modules"][0]["verdict"]["outcome"] == "reproduced: error"


ASYNC_OOM = (
    "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 2039591771319067904 bytes."
)


@pytest.mark.jax
@pytest.mark.slow
@pytest.mark.parametrize("how", ["block_until_ready", "jax.block_until_ready"])
def test_an_error_met_at_the_programs_own_wait_is_recorded_as_the_calls_error(
    how: str, tmp_path: Path
) -> None:
    """tests/programs/caught_async_oom.py: ``jit(_init)`` returns before XLA fails to
    allocate its output (its input is still being computed), and the error surfaces only at
    the program's wait, which catches it and returns from ``main`` (dropping the output)
    before sys.exit. Before, the watcher's ``ready`` had no error and nothing read it
    later: the call's error was lost."""
    env = {**hooked_env(tmp_path), hook.ENV_ARGS_BUDGET: str(1_000_000)}
    done = run([sys.executable, str(PROGRAMS / "caught_async_oom.py"), how], env, tmp_path)
    assert done.returncode == 78, done.stderr
    assert "could not materialise the table (RESOURCE_EXHAUSTED: Out of memory" in done.stderr
    (jsonl,) = (tmp_path / evidence_files.PROCESSES).glob("*.jsonl")
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    (n,) = [r["n"] for r in records if r["e"] == "execute" and r["module"] == "jit__init"][1:]
    # The path taken: dispatch returned with the device still at work, no error at the call,
    # the input (over the budget) neither saved nor waited on.
    (executed,) = [r for r in records if r["e"] == "executed" and r["n"] == n]
    assert executed.get("pending") is True and "error" not in executed, executed
    assert any(r["e"] == "args_skipped" and r["n"] == n for r in records)
    # The error, as the call's own: what the program's wait met.
    errors = [r["error"] for r in records if r["e"] == "ready" and r["n"] == n and "error" in r]
    assert errors == [ASYNC_OOM]
    (p,) = evidence_files.load(tmp_path)
    (call,) = [e for e in p.events if e.n == n]
    assert call.error == ASYNC_OOM and call.finished and not call.on_device
    assert p.raised == call


@pytest.mark.jax
@pytest.mark.slow
def test_an_out_of_memory_met_only_at_the_wait_reproduces_as_that_out_of_memory(
    tmp_path: Path,
) -> None:
    """The run of held-out program embedding_bootstrap where the error surfaced only at the
    wait: its verdict is the out-of-memory, reproduced by the replay, not the program's own
    ERROR line with a replay "failed differently"."""
    program = [sys.executable, str(PROGRAMS / "caught_async_oom.py")]
    c = run_collect(tmp_path / "b.zip", program, "--max-dump-size", "1MB")
    # Reproduced, and larger than the memory the program left itself: not XLA's bug.
    assert c.returncode == 3, c.stderr
    assert c.manifest()["blame"]["whose"] == "not xla", c.stderr
    failure = c.manifest()["failure"]
    assert failure["kind"] == "runtime error", failure
    assert failure["status_code"] == "RESOURCE_EXHAUSTED"
    assert failure["headline"] == ASYNC_OOM.split(": ", 1)[1]
    assert failure["executing"] == "_init"
    assert "could not materialise the table" in failure["evidence"]
    chosen = [m for m in c.manifest()["modules"] if m["label"].endswith("jit__init")]
    assert [m["replay"]["outcome"] for m in chosen] == ["reproduced: error"], chosen
    assert "this does not look like an XLA bug: XLA could not allocate" in c.stderr
    assert "failed differently" not in c.stderr
