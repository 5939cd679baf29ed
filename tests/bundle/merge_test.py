"""``merge`` of a real job whose one process found a wrong result and whose others then lost
their gloo connection to it (tests/programs/wrong_then_lost_peer.py, 3 processes of 2 CPU
devices, each under its own collect as ``srun xla-bugkit collect -- python prog.py`` starts
them): the merged bundle is judged by the wrong result, the others are the job's doing.
The unit tests of the choice are in parts_test.py.

Exiting at once, process 0 leaves its wrong result unproven: the capture hook keeps no
inputs of the sharded step (another process holds part of each global array) and never sees
the last execution end, and that module is the one replayed; the merged job says what
process 0's part says."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, Collected, clean_env
from xla_bugkit.errors import ExitCode

pytestmark = [pytest.mark.slow, pytest.mark.jax]

JOB = PROGRAMS / "wrong_then_lost_peer.py"
PROCESSES = 3


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=["at-once", "sys-exit"])
def parts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[Collected]:
    """Every process of the job under its own collect, all at once; each one's Collected.
    Process 0 exits ``at-once`` (the others lose their gloo connection to it) or by
    ``sys-exit`` (it waits at jax.distributed's shutdown barrier until the service aborts
    every process)."""
    folder = tmp_path_factory.mktemp(request.param)
    port, started = str(_port()), []
    # The job's coordination service gives up on a silent process after 10 s.
    env = {**clean_env(), "JOB_STEP_HEARTBEAT": "10"}
    for rank in range(PROCESSES):
        # --snapshots first: a part of a job cannot run again alone (its job is gone), which
        # collect would do for a wrong result its first-call inputs did not show.
        command = [XLA_BUGKIT, "collect", "--timeout", "600", "--snapshots", "first", "--job-part",
                   f"{rank}/{PROCESSES}", "-o", str(folder / "bundle.zip"), "--",
                   sys.executable, str(JOB), str(rank), str(PROCESSES), port,
                   request.param]  # fmt: skip
        # Files, not pipes: one collect must not block on a pipe read only later.
        with (folder / f"collect{rank}.err").open("w") as err:
            started.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err,
                                            env=env))  # fmt: skip
    done = []
    for rank, child in enumerate(started):
        child.wait(timeout=READY_TIMEOUT)
        bundle = folder / f"bundle.part-{rank}-of-{PROCESSES}.zip"
        done.append(Collected(child.returncode, (folder / f"collect{rank}.err").read_text(),
                              bundle))  # fmt: skip
    return done


def test_each_survivor_is_told_the_job_ended_it_with_no_issue_link(
    parts: list[Collected],
) -> None:
    wrong, *survivors = parts
    assert wrong.returncode in (ExitCode.OK, ExitCode.NOT_REPRODUCED), wrong.stderr[-3000:]
    assert wrong.manifest()["failure"]["kind"] == "wrong result"
    assert not wrong.manifest()["failure"]["peer"]
    for survivor in survivors:
        assert survivor.returncode == ExitCode.NOT_REPRODUCED, survivor.stderr[-3000:]
        failure = survivor.manifest()["failure"]
        assert failure["peer"], failure
        said = " ".join(survivor.stderr.split())
        assert "this does not look like an XLA bug: another process of the job failed" in said
        assert "open a new issue" not in said and "issues/new" not in said
        assert "**This does not look like an XLA bug:**" in survivor.text("ISSUE.md")
        assert survivor.manifest()["title"].startswith("Ended by its job")
        # Which of the two a survivor meets first, gloo's lost connection or the JAX client's
        # abort as the coordination service goes with process 0, is a race between two of
        # its threads (tests/failure/peers_test.py reads real outputs of each).
        if failure["peer"].startswith("a collective lost its connection"):
            # Its first error, not the JAX client's abort at exit, is the headline.
            assert re.match(r"UNKNOWN: Gloo (all-reduce|AllGather) failed: \[", failure["headline"])


def test_the_merged_job_is_judged_by_the_wrong_result(
    parts: list[Collected], tmp_path: Path
) -> None:
    out = tmp_path / "job.zip"
    done = subprocess.run([XLA_BUGKIT, "merge", "-o", str(out), *(str(p.bundle) for p in parts)],
                          capture_output=True, text=True, env=clean_env(),
                          timeout=READY_TIMEOUT)  # fmt: skip
    wrong = parts[0]
    # The job's exit status is the wrong result's part's own.
    assert done.returncode == wrong.returncode, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "a job of 3 processes on 1 machine, 2 devices each (6 in all): part 0 failed" in said
    # The parts the job ended are not counted among those that failed; unproven, the
    # program's own check is the program's word.
    outcomes = [(m.get("replay") or {}).get("outcome", "") for m in wrong.manifest()["modules"]]
    proven = any(o.startswith("reproduced") for o in outcomes)
    assert f"part 0 failed {'inside XLA' if proven else 'on its own'}" in said
    assert said.count("taken down by the job") == PROCESSES - 1
    manifest = Collected(done.returncode, done.stdout, out).manifest()
    assert manifest["job"]["part"] == 0
    assert manifest["failure"] == wrong.manifest()["failure"]
    assert manifest["title"] == wrong.manifest()["title"]
