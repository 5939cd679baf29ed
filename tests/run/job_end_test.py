"""When a job's part is ended early: real outputs of processes a job took down (the job's
transport or coordination losing another process) and of processes that failed on their own
inside a job, read a line at a time as collect reads them while the process runs."""

from __future__ import annotations

import pytest

from tests.failure.peers_test import DATA, JOBS, OWN
from xla_bugkit.failure.classify import classify
from xla_bugkit.run.job_end import JobEnd


def _read(output: str, job_end: JobEnd) -> tuple[float | None, str]:
    """``output`` fed a line at a time: the grace asked, and the output up to that line."""
    seen = []
    for line in output.splitlines(keepends=True):
        seen.append(line)
        if (grace := job_end(line.encode())) is not None:
            return grace, "".join(seen)
    return None, "".join(seen)


# Excerpts whose process was ended by the job only once a launcher's signal or its own
# abort said so: the job's words come there, not on an error line of their own before.
_LAUNCHERS_ONLY = {"mpi_abort_other_rank.txt"}


@pytest.mark.parametrize("name", sorted(set(JOBS) - _LAUNCHERS_ONLY))
def test_a_part_its_job_ended_is_ended_at_the_jobs_first_error(name: str) -> None:
    job_end = JobEnd(grace=2.5)
    grace, before = _read((DATA / name).read_text(), job_end)
    assert grace == 2.5, name
    # In the judge's words of what it had said by then (the part's record is the judge's of
    # its whole output), which ends with a line of the job's, not an INFO line.
    assert job_end.peer is not None
    assert not before.splitlines()[-1].startswith("I1")


# A process's own failure that its output showed only after the job's first line: its
# program had ended (its own check's exit) and it waited at the job's shutdown barrier,
# whose failure the service logs a line at a time; or the service's error reached it in
# its own compile, a moment before its CHECK. It is asked to end; what it prints in its
# grace makes its record its own (the judge reads the whole output).
_OWN_AFTER_THE_JOBS_LINE = {
    "check_failed_as_the_service_ended_it.txt",
    "wrong_result_then_shutdown_barrier_abort.txt",
}


@pytest.mark.parametrize("name", sorted(set(OWN) - _OWN_AFTER_THE_JOBS_LINE))
def test_a_part_that_failed_on_its_own_first_is_never_ended(name: str) -> None:
    """Its own CHECK, out-of-memory or wrong result came before the job's end: it is left to
    end as it would, its own failure what its part says."""
    job_end = JobEnd()
    grace, _ = _read((DATA / "own" / name).read_text(), job_end)
    assert grace is None and job_end.peer is None


@pytest.mark.parametrize("name", sorted(_OWN_AFTER_THE_JOBS_LINE))
def test_a_part_ended_in_its_grace_keeps_its_own_failure(name: str) -> None:
    output = (DATA / "own" / name).read_text()
    assert _read(output, JobEnd())[0] is not None
    # Killed at the grace's end, the whole output it printed is judged its own failure.
    failure = classify(output, exit_status=-9)
    assert failure.peer is None and failure.kind is OWN[name][1]


def test_the_job_is_read_once_and_info_lines_never_end_a_part() -> None:
    text = (DATA / "gloo_all_reduce_closed_by_peer_after_the_abort.txt").read_text()
    info = "".join(text.splitlines(keepends=True)[:7])
    assert "coordination service" in info
    job_end = JobEnd()
    assert _read(info, job_end)[0] is None
    grace, _ = _read(text, job_end)
    assert grace is not None
    # Once asked, never again: the part is ended once.
    assert job_end(b"E1206 14:31:47.649525 Polled an error from coordination service\n") is None


def test_the_grace_is_the_options() -> None:
    job_end = JobEnd(grace=0.0)
    assert _read((DATA / "heartbeat_timeout.txt").read_text(), job_end)[0] == 0.0
