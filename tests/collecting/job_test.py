"""A multi-process job run as a cluster runs it: each process under its own collect (as
``srun xla-bugkit collect -- python train.py`` starts them). The process that crashed in XLA
gets the XLA bug; the one the job took down after it is told so, with no issue link."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, Collected, clean_env
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure import peers

# What rank 0 of tests/programs/two_ranks.py printed when rank 1 had crashed (jaxlib 0.10.2).
SURVIVOR = """\
jax.errors.JaxRuntimeError: UNKNOWN: Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: cpu:gloo/0,2048/1 and duration: 29.999999962s [type.googleapis.com/tensorflow.CoordinationServiceError='']
E1206 04:46:42.453697    5679 coordination_service.cc:1549] Use error polling to propagate the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):
1
The tasks have crashed. Check the task logs for an earlier error.
F1206 04:46:42.454236    5669 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details.
Barrier result: 'INTERNAL: Barrier failed because: task is set to ERROR: UNAVAILABLE: Task 1 heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed unexpectedly.
"""  # noqa: E501


# Rank 0 of tests/programs/job_step.py (heartbeat 10 s) blocked in the step's all-reduce when
# rank 1 crashed compiling it: the service's own error is the last status it printed.
SURVIVOR_IN_A_STEP = """\
E1206 09:15:21.722542    5143 coordination_service.cc:1549] [11701085413115773194] Use error polling to propagate the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):
1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further. [type.googleapis.com/tensorflow.CoordinationServiceError='']
E1206 09:15:21.723127    5154 coordination_service_agent.cc:289] Polled an error from coordination service (this can be an error from this or another task).
F1206 09:15:21.723334    5154 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output
1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.

RPC: /xla.coordination.CoordinationService/PollForError [type.googleapis.com/tensorflow.CoordinationServiceError='']
*** Check failure stack trace: ***
"""  # noqa: E501


def test_a_survivor_ended_inside_a_collective_is_told_which_task_failed() -> None:
    from xla_bugkit.failure.classify import classify

    failure = classify(SURVIVOR_IN_A_STEP, exit_status=-6)
    assert failure.peer is not None and failure.peer.startswith("task 1 of the job")


def test_a_process_whose_own_compile_aborted_as_the_job_ended_it_failed_on_its_own() -> None:
    """Every process of the job crashing alike: the service ended this one (another had died
    first) 5 ms before its own compile's CHECK aborted it; the CHECK is its failure."""
    from xla_bugkit.failure.classify import classify

    own = (
        "F1206 09:16:57.796941    6255 buffer_assignment_util.cc:46] Check failed: "
        "const_instr == nullptr (0x7fba5c3242a0 vs. (null))\n"
    )
    output = SURVIVOR_IN_A_STEP.replace("*** Check failure stack trace: ***\n", own)
    failure = classify(output, exit_status=-6)
    assert failure.peer is None
    assert failure.site == "buffer_assignment_util.cc:46"


def test_a_collective_whose_peer_died_took_this_process_down() -> None:
    """Process 0 of 3 in an all-gather with process 2, which died: gloo's connection to it
    dropped, and that error was all this process printed before it exited."""
    from xla_bugkit.failure.classify import classify

    output = (
        "Traceback (most recent call last):\n  ...\njax.errors.JaxRuntimeError: UNKNOWN: Gloo "
        "AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] Read error "
        "[127.0.0.1]:38274: Connection reset by peer\n"
    )
    failure = classify(output, exit_status=1)
    assert failure.peer == (
        "a collective lost its connection to another process of the job, which had died"
    )
    own = output.replace("Connection reset by peer", "Bad message length")
    assert classify(own, exit_status=1).peer is None


def test_the_programs_last_words_are_not_the_services_goodbye() -> None:
    """A process of a job that printed its own alarm and exited 1: the JAX service's INFO line
    at exit comes after it, and is not the failure's headline."""
    from xla_bugkit.failure.classify import classify

    output = (
        "[Gloo] Rank 0 is connected to 3 peer ranks.\n"
        "EVAL FAILED: rotation changed the norm of 4 of 65540 points\n"
        "I1206 09:30:21.355306   17887 service.cc:114] Jax service shutting down\n"
    )
    failure = classify(output, exit_status=1)
    assert failure.headline == "EVAL FAILED: rotation changed the norm of 4 of 65540 points"


def test_a_survivor_of_a_job_is_told_which_task_failed() -> None:
    said = peers.peer_failure(
        SURVIVOR, "JaxRuntimeError: UNKNOWN: Gloo context initialization failed"
    )
    assert said is not None and said.startswith("task 1 of the job stopped sending heartbeats")
    # Its own XLA error first, then the same end: its own failure.
    own = "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    assert peers.peer_failure(SURVIVOR, own) is None
    assert peers.peer_failure("Traceback ...\nValueError: x\n", None) is None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.jax
def test_each_process_of_a_job_under_its_own_collect(tmp_path: Path) -> None:
    port = str(_port())
    started = []
    for rank in ("0", "1"):
        out = tmp_path / f"rank{rank}.zip"
        command = [XLA_BUGKIT, "collect", "--timeout", "600", "-o", str(out), "--",
                   sys.executable, str(PROGRAMS / "two_ranks.py"), rank, port]  # fmt: skip
        # Files, not pipes: one collect must not block on a pipe the test reads later.
        with (tmp_path / f"rank{rank}.err").open("w") as err:
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err,
                                     env=clean_env())  # fmt: skip
        started.append((out, child))
    (out0, rank0), (out1, rank1) = started
    # No launcher's environment, no --job-part: the process id the hook saw names each part.
    out0, out1 = (tmp_path / f"rank{r}.part-{r}-of-2.zip" for r in "01")
    rank1.wait(timeout=READY_TIMEOUT)
    rank0.wait(timeout=READY_TIMEOUT)
    err0, err1 = ((tmp_path / f"rank{r}.err").read_text() for r in "01")
    crashed = Collected(rank1.returncode, err1, out1)
    assert crashed.returncode == ExitCode.OK, err1[-3000:]
    assert crashed.manifest()["modules"][0]["replay"]["outcome"] == "reproduced: crash"
    assert crashed.manifest()["job"]["from"] == "jax.distributed"
    survivor = Collected(rank0.returncode, err0, out0)
    assert survivor.returncode == ExitCode.NOT_REPRODUCED, err0[-3000:]
    failure = survivor.manifest()["failure"]
    assert failure["peer"].startswith("task 1 of the job stopped sending heartbeats")
    said = " ".join(err0.split())
    assert "this does not look like an XLA bug: another process of the job failed first" in said
    assert "not replayed: another process of the job failed first" in said
    assert "open a new issue" not in said
    assert all(m.get("replay") is None for m in survivor.manifest()["modules"])
