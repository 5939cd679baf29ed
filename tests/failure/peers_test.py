"""A process of a job ended by the job, not by XLA: real log excerpts of the job's transport
(gloo, NCCL, MPI) and coordination service (heartbeats, barriers, shutdown, preemption) losing
another process, each read as the job's; and real XLA failures inside a job, which are not.

The excerpts are in data/peers/ (the job's) and data/peers/own/ (a process's own failure),
one file each, as the processes printed them: those named in ``OWN_RUNS`` were printed by
tests/programs/wrong_then_lost_peer.py and job_step.py on jaxlib 0.10.2 (CPU, gloo); the
others are users' logs of other versions and platforms (jax-ml/jax, NVIDIA/nccl, Open MPI
and levanter issues), kept in their wording.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.failure import peers
from xla_bugkit.failure.classify import Kind, classify

DATA = Path(__file__).parent / "data" / "peers"

_LOST = "a collective lost its connection to another process of the job, which had died"
_NEVER_CAME = "a collective timed out waiting for another process of the job, which never joined"
_HEARTBEATS = "task 1 of the job stopped sending heartbeats"
_SHUTDOWN = "another process of the job never reached jax.distributed's shutdown barrier"
_LEADER_GONE = "the job's coordination service (in process 0) went away"
_BARRIER = "the job's coordination service gave up waiting for another process of the job"

# Each excerpt of the job's: its exit status, what the process is told took it down, and the
# first error the headline names (not the abort that followed it).
JOBS = {
    # wrong_then_lost_peer.py 1 of 3: process 0 exited; the next step's all-reduce lost it,
    # and at exit the shutdown found the coordination service (process 0's) gone.
    "gloo_all_reduce_closed_by_peer.txt": (-6, _LOST, "UNKNOWN: Gloo all-reduce failed"),
    # The same under collect (its log.txt): the JAX client's abort, from another thread,
    # reached the output before Python printed the all-reduce's error.
    "gloo_all_reduce_closed_by_peer_after_the_abort.txt": (
        -6,
        _LOST,
        "UNKNOWN: Gloo all-reduce failed",
    ),
    # The same under collect, process 1 still in the gather when process 0 exited: the
    # abort's line cut into the traceback's, where no fatal line is read.
    "gloo_all_gather_reset_cut_into_by_the_abort.txt": (
        -6,
        _LOST,
        "UNKNOWN: Gloo AllGather failed",
    ),
    # wrong_then_lost_peer.py 2 of 3: in the all-reduce when the service went away.
    "service_leader_gone.txt": (-6, _LEADER_GONE, "client.h:80] Terminating process"),
    # wrong_then_lost_peer.py sys-exit 1 of 3: in the all-reduce while process 0 waited at
    # the shutdown barrier, until the barrier timed out.
    "shutdown_barrier_failed.txt": (-6, _SHUTDOWN, "client.h:80] Terminating process"),
    # wrong_then_lost_peer.py sys-exit, checker 1 of 2: its own check's sys.exit(1), then the
    # shutdown barrier, which process 0 (in the all-reduce) never reached; the service's
    # abort reads as the job's. Only its record says it had ended itself (see below).
    "shutdown_barrier_abort_after_own_exit.txt": (
        -6,
        _SHUTDOWN,
        "client.h:80] Terminating process",
    ),
    # job_step.py wrong, 1 of 3: its barrier's new gloo context waited for process 0.
    "gloo_context_get_key_value_timed_out.txt": (
        1,
        _NEVER_CAME,
        "UNKNOWN: Gloo context initialization failed",
    ),
    "gloo_all_gather_read_error_reset.txt": (1, _LOST, "UNKNOWN: Gloo AllGather failed"),
    "gloo_all_gather_closed_by_peer_then_abort.txt": (-6, _LOST, "UNKNOWN: Gloo AllGather"),
    "gloo_enforce_data_size.txt": (
        -6,
        "gloo aborted this process",
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
    ),
    "heartbeat_timeout.txt": (-6, _HEARTBEATS, "UNKNOWN: Gloo context initialization failed"),
    "heartbeats_stopped_in_a_step.txt": (-6, _HEARTBEATS, "UNAVAILABLE: The following tasks"),
    "barrier_timed_out_at_connect.txt": (1, _BARRIER, "DEADLINE_EXCEEDED: Barrier timed out"),
    "barrier_timed_out_in_broadcast.txt": (1, _BARRIER, "DEADLINE_EXCEEDED: Barrier timed out"),
    "polled_error_leader_died.txt": (-6, _LEADER_GONE, "client.h:77] Terminating process"),
    "nccl_unhandled_system_error.txt": (1, "NCCL lost another process", "INTERNAL: Failed to"),
    "nccl_remote_process_exited.txt": (1, "NCCL lost another process", "ncclRemoteError: A call"),
    "mpi_abort_other_rank.txt": (-15, "MPI ended the job", "killed by SIGTERM"),
    "preemption_notice.txt": (-6, "the job was preempted", "client.h:80] Terminating process"),
}
# Each excerpt of a process's own failure inside a job: its exit status and its kind.
OWN = {
    # stale_flags_trainer (benchmarks/multihost): process 1's own compile's CHECK.
    "check_failed_compiling_in_a_job.txt": (-6, Kind.COMPILE_CRASH),
    # job_step.py crash-all: the service ended it 5 ms before its own compile's CHECK.
    "check_failed_as_the_service_ended_it.txt": (-6, Kind.CRASH),
    # Its own out-of-memory, then the service's abort: the error is the failure.
    "out_of_memory_then_heartbeats.txt": (-6, Kind.RUNTIME_ERROR),
    "ret_check_in_a_job.txt": (1, Kind.RUNTIME_ERROR),
    # rotation_eval_wrong (benchmarks/multihost): the program's own check, then the JAX
    # service's INFO line at exit.
    "wrong_result_then_service_goodbye.txt": (1, Kind.EXIT),
    # wrong_then_lost_peer.py sys-exit, 0 of 3: its own check's exit, then 30 s at the
    # shutdown barrier (the others were in the all-reduce) until the service aborted it.
    "wrong_result_then_shutdown_barrier_abort.txt": (-6, Kind.WRONG_RESULT),
}


def test_every_excerpt_has_its_test() -> None:
    assert {p.name for p in DATA.glob("*.txt")} == set(JOBS)
    assert {p.name for p in (DATA / "own").glob("*.txt")} == set(OWN)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_a_process_the_job_ended_is_told_so(name: str) -> None:
    exit_status, said, first = JOBS[name]
    output = (DATA / name).read_text()
    failure = classify(output, exit_status=exit_status)
    assert failure.peer is not None and failure.peer.startswith(said), failure.peer
    # The first error is the headline, not the JAX client's abort that came after it.
    assert failure.headline.startswith(first), failure.headline
    assert peers.job_error(output) is not None


@pytest.mark.parametrize("name", sorted(OWN))
def test_a_process_that_failed_on_its_own_is_not_excused(name: str) -> None:
    exit_status, kind = OWN[name]
    failure = classify((DATA / "own" / name).read_text(), exit_status=exit_status)
    assert failure.peer is None, failure.peer
    assert failure.kind is kind
    assert peers.TERMINATED not in failure.headline


def test_a_collective_that_lost_its_peer_is_the_job_across_lines_and_spellings() -> None:
    """gloo names the collective with a hyphen or in CamelCase, and XLA may wrap its text."""
    for op in ("all-reduce", "AllGather", "reduce-scatter", "all_to_all"):
        said = f"UNKNOWN: Gloo {op} failed: [external/gloo/gloo/transport/tcp/pair.cc:547]"
        assert peers.job_error(f"{said} Connection closed by peer [127.0.0.1]:1957") == _LOST
        assert peers.job_error(f"{said}\nConnection closed by peer [127.0.0.1]:1957") == _LOST
    # gloo's own words for a message it could not make sense of are not a lost peer.
    assert peers.job_error("Gloo all-reduce failed: [pair.cc:547] Bad message length") is None


def test_a_process_stopped_from_outside_is_the_jobs_only_when_an_error_line_says_so() -> None:
    """Every process of a job logs the coordination service at INFO as it starts; a launcher's
    SIGTERM after that alone says nothing of who failed."""
    started = (DATA / "gloo_all_reduce_closed_by_peer_after_the_abort.txt").read_text()
    info = "\n".join(started.splitlines()[:3]) + "\n"
    assert "coordination service" in info
    assert classify(info, exit_status=-15).peer is None
    mpi = info + (DATA / "mpi_abort_other_rank.txt").read_text()
    assert classify(mpi, exit_status=-15).peer == "MPI ended the job after one of its ranks " + (
        "called MPI_ABORT"
    )
    assert classify(mpi, exit_status=-11).peer is None  # its own segfault


def test_an_xla_error_that_says_nothing_of_the_job_is_not_excused() -> None:
    for own in (
        "INTERNAL: RET_CHECK failure (external/xla/xla/service/cpu/dot_op_emitter.cc:1124) x",
        "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr",
        "RESOURCE_EXHAUSTED: Out of memory allocating 17179869184 bytes.",
    ):
        assert peers.job_error(own) is None
        assert peers.peer_failure((DATA / "heartbeat_timeout.txt").read_text(), own) is None


def test_the_process_at_the_shutdown_barrier_had_ended_on_its_own() -> None:
    """Task 0 runs the coordination service: its own log of the failed shutdown barrier names
    the tasks that never reached it, and task 0 is not among them."""
    text = (DATA / "own" / "wrong_result_then_shutdown_barrier_abort.txt").read_text()
    failure = classify(text, exit_status=-6)
    assert failure.headline == "row energy wrong at 6 rows, first 16384: 266342400.0"
    assert failure.evidence is not None and "shutdown barrier" in failure.evidence
    assert failure.signal is None  # the service's abort is not how its program ended
    # The same service's line when task 0 itself never reached the barrier: the job's doing.
    late = text.replace("timed out task names:\n1\n2\n", "timed out task names:\n0\n2\n")
    assert peers.ended_on_its_own(late) is None
    assert classify(late, exit_status=-6).peer is not None


# Real wordings of the job's texts, one row of ``peers.JOB_TEXTS`` or more each, as
# processes of several versions printed them (jaxlib 0.4 to 0.10, gloo, NCCL, Open MPI, the
# coordination service's statuses and their gRPC forms). The cheap pre-test must find each.
WORDINGS = (
    # gloo
    "jax.errors.JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: "
    "[external/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:1957",
    "jax.errors.JaxRuntimeError: UNKNOWN: Gloo AllGather failed: "
    "[external/gloo/gloo/transport/tcp/pair.cc:538] Read error [127.0.0.1]:38274: "
    "Connection reset by peer",
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
    "jax.errors.JaxRuntimeError: UNKNOWN: Gloo context initialization failed: "
    "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: cpu:gloo/0,2048,4096/0 and "
    "duration: 29.99999995s",
    # NCCL
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3763, remote "
    "process exited or there was a network error, NCCL version 2.28.8",
    "remote process exited or there was a network error",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process "
    "exiting prematurely.",
    "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation "
    "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error",
    # Open MPI
    "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
    # the coordination service: shutdown, a lost leader, barriers, heartbeats (UNAVAILABLE)
    "E1206 14:30:20.190 9450 coordination_service.cc:1070] Shutdown barrier in coordination "
    "service has failed: DEADLINE_EXCEEDED: Barrier timed out. Some timed out task names:",
    "UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task died or "
    "was restarted unexpectedly, or this task is experiencing network issues.",
    "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
    "PjRT_Client_Connect. Timed out task names:",
    "INTERNAL: Barrier failed because: task is set to ERROR: UNAVAILABLE: Task 1 heartbeat "
    "timeout. This indicates that the remote task has failed, got preempted, or crashed "
    "unexpectedly.",
    "E1206 04:46:42.453697 5679 coordination_service.cc:1549] Use error polling to propagate "
    "the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy "
    "(stopped sending heartbeats):\n1\nThe tasks have crashed.",
    # the JAX client's end of a process, and the service's error in its gRPC form
    "F1206 04:46:42.454236 5669 client.h:80] Terminating process because the JAX distributed "
    "service detected fatal errors. This most likely indicates that another task died",
    "E1206 14:31:47.649 13733 coordination_service_agent.cc:289] Polled an error from "
    "coordination service (this can be an error from this or another task).",
    "RPC: /xla.coordination.CoordinationService/PollForError "
    "[type.googleapis.com/tensorflow.CoordinationServiceError='']",
    # preemption
    "W1206 03:12:09.118 40211 preemption_notifier.cc:89] SIGTERM caught at "
    "2026-12-06T03:12:09.118174+00:00",
    "I1206 03:12:09.120 40233 preemption_sync_manager.cc:165] Received preemption notice with "
    "death_time 2026-12-06T03:12:09.118174+00:00",
)


def test_the_cheap_pre_test_finds_every_wording_the_jobs_texts_read() -> None:
    """``_JOB_SIGNS`` is asked before ``JOB_TEXTS`` (on every line a part prints): a wording a
    row reads that the pre-test misses would never be read at all."""
    excerpts = [p.read_text() for p in sorted(DATA.glob("*.txt"))]
    read_by: dict[int, int] = {}
    for text in (*WORDINGS, *excerpts):
        rows = [i for i, t in enumerate(peers.JOB_TEXTS) if t.pattern.search(text)]
        assert rows, f"no row of JOB_TEXTS reads {text[:120]!r}"
        assert peers.mentions_job(text), text[:200]
        for i in rows:
            read_by[i] = read_by.get(i, 0) + 1
            # Each match alone, cut from its text, is found too.
            found = peers.JOB_TEXTS[i].pattern.search(text)
            assert found is not None and peers.mentions_job(found.group(0)), found
    # Every row has real wordings here, several where there are several.
    assert set(read_by) == set(range(len(peers.JOB_TEXTS)))


def test_a_lost_peer_shows_on_an_error_line_not_on_info_or_warning() -> None:
    """What ends a part early: a line of the job's at error level or raised, never the INFO
    lines every process of a job logs as it starts, nor the warning that it could not read a
    preemption notice once the service was gone."""
    started = (DATA / "gloo_all_reduce_closed_by_peer_after_the_abort.txt").read_text()
    info = "\n".join(started.splitlines()[:3]) + "\n"
    assert peers.mentions_job(info) and not peers.says_job_ended(info)
    warned = (
        "W1206 14:31:47.649463 13733 preemption_sync_manager.cc:147] Failed to retrieve "
        "preemption notice from coordination service: UNAVAILABLE: Socket closed\n"
    )
    assert not peers.says_job_ended(warned)
    for text in WORDINGS:
        if not text.startswith(("I1", "W1")):
            assert peers.says_job_ended(text + "\n"), text


# Real outputs of a process that called sys.exit(1) after its own check and was then aborted
# at jax.distributed's shutdown barrier: what its own record says it asked for decides.
ASKED = {
    "shutdown_barrier_abort_after_own_exit.txt": "row energy wrong at 4 rows, first 16384",
    "own/wrong_result_then_shutdown_barrier_abort.txt": "row energy wrong at 6 rows, first 16384",
}


@pytest.mark.parametrize("name", sorted(ASKED))
def test_a_process_whose_record_says_it_exited_itself_failed_by_its_own_check(name: str) -> None:
    failure = classify((DATA / name).read_text(), exit_status=-6, asked_exit=1)
    assert failure.peer is None, failure.peer
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.headline.startswith(ASKED[name]), failure.headline
    assert failure.exit_status == -6 and failure.signal is None
    assert failure.evidence == (
        "the program ended itself: it called sys.exit(1) (its process's own record), and was "
        "then ended during its exit (SIGABRT), before it could finish"
    )


def test_where_the_jobs_word_on_a_process_begins() -> None:
    output = (DATA / "shutdown_barrier_abort_after_own_exit.txt").read_text()
    end = peers.job_end(output)
    assert (
        end is not None and output[end:].startswith("F1207 ") and peers.TERMINATED in output[end:]
    )
    assert "row energy wrong" in output[:end] and peers.job_error(output[:end]) is None
    # The service's INFO line as every process starts is no end; an error line is.
    started = (
        "I1206 14:45:53.617050    7513 coordination_service_agent.cc:276] Polling for error "
        "from coordination service. This is a long-running RPC that will return only if an "
        "error is encountered or cancelled\n"
    )
    assert peers.mentions_job(started) and peers.job_end(started) is None
    lost = "E1206 1 2 pair.cc:547] Gloo all-reduce failed: Connection closed by peer [::1]\n"
    assert peers.job_end(started + "step 3\n" + lost) == len(started) + len("step 3\n")
