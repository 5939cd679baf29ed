"""Which part of a job of several machines a collect is, and the output that says so."""

from __future__ import annotations

import datetime
import json
import re
import socket
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS
from xla_bugkit.cli.main import main
from xla_bugkit.collecting import job
from xla_bugkit.errors import BugkitError, ExitCode


@pytest.mark.parametrize(
    ("env", "part"),
    [
        ({"SLURM_PROCID": "3", "SLURM_NTASKS": "8"}, "part 3 of 8 of a job (SLURM_PROCID)"),
        (
            {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"},
            "part 1 of 4 of a job (OMPI_COMM_WORLD_RANK)",
        ),
        ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "part 0 of 2 of a job (PMI_RANK)"),
        (
            {"TPU_WORKER_ID": "2", "TPU_WORKER_HOSTNAMES": "h0,h1,h2,h3"},
            "part 2 of 4 of a job (TPU_WORKER_ID)",
        ),
    ],
)  # fmt: skip
def test_the_launchers_environment_names_the_part(env: dict[str, str], part: str) -> None:
    found = job.detect(env)
    assert found is not None and found.describe() == part


def test_a_job_of_one_task_is_no_job_of_parts() -> None:
    assert job.detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None
    assert job.detect({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "localhost"}) is None
    assert job.detect({}) is None
    assert job.detect({"JOB_COMPLETION_INDEX": "0"}) is None  # its size is not known


def test_each_part_writes_an_output_of_its_own() -> None:
    part = job.parse("3/8")
    assert job.part_output(Path("out/bundle.zip"), part) == Path("out/bundle.part-3-of-8.zip")
    assert job.part_output(Path("b.tar.gz"), part) == Path("b.part-3-of-8.tar.gz")
    assert job.part_output(Path("b.7z"), job.parse("2")) == Path("b.part-2.7z")
    for bad in ("3/3", "x", "-1/4", "1/4/2"):
        with pytest.raises(BugkitError, match="--job-part"):
            job.parse(bad)


@pytest.mark.jax
def test_collect_of_a_part_names_its_bundle_and_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    argv = ["collect", "--always", "--no-replay", "-o", str(tmp_path / "b.zip"), "--",
            sys.executable, str(PROGRAMS / "success.py")]  # fmt: skip
    assert main(argv) == ExitCode.NO_FAILURE  # bundled all the same (--always)
    written = tmp_path / "b.part-1-of-2.zip"
    assert written.exists() and not (tmp_path / "b.zip").exists()
    with zipfile.ZipFile(written) as z:
        manifest = json.loads(z.read("manifest.json"))
    job = manifest["job"]
    assert (job["part"], job["parts"], job["from"]) == (1, 2, "SLURM_PROCID")
    # When the program ended (UTC, to the ms) and its machine, told apart without its name.
    ended = datetime.datetime.fromisoformat(job["ended"])
    assert ended.tzinfo is not None and abs(time.time() - ended.timestamp()) < 24 * 3600
    assert re.fullmatch(r"[0-9a-f]{10}", job["host"]) and socket.gethostname() not in job["host"]
    assert "job: this is part 1 of 2 (SLURM_PROCID)" in capsys.readouterr().err


# The job's heartbeat timeout for the jobs below: jax's default, so that a part the job took
# down ends at once only because collect ends it.
_JAX_HEARTBEAT = "100"


@pytest.mark.jax
@pytest.mark.slow
def test_a_part_keeps_every_snapshot_in_its_one_run(tmp_path: Path) -> None:
    """tests/programs/job_step.py later-wrong: process 0's own jit computes a wrong value only
    on its second call's inputs, and it exits 1. A part cannot run again without its job:
    part 0's one run kept XLA's snapshot of every execution, whose newest replays the wrong
    value, and the program did not run a second time."""
    from tests.collecting.merge_test import _job

    checked, waiting = _job(tmp_path / "later", 2, "later-wrong", heartbeat=_JAX_HEARTBEAT)
    assert checked.returncode == ExitCode.OK, checked.stderr[-3000:]
    assert "inputs: XLA's snapshot of every execution" in checked.stderr
    assert "running the program again" not in checked.stderr
    manifest = checked.manifest()
    first = manifest["modules"][0]
    assert first["name"] == "jit_local_energy"
    assert first["replay"]["outcome"] == "reproduced: wrong result", checked.stderr[-3000:]
    assert any(n.startswith("XLA's snapshot of every execution was kept in the one run")
               for n in manifest["notes"]), manifest["notes"]  # fmt: skip
    assert waiting.returncode == ExitCode.NOT_REPRODUCED, waiting.stderr[-3000:]
    assert waiting.manifest()["failure"]["peer"]


@pytest.mark.jax
@pytest.mark.slow
def test_a_part_learned_from_jax_distributed_says_why_it_does_not_run_again(
    tmp_path: Path,
) -> None:
    """The same job, each collect told nothing of its part: part 0's run kept the first
    call's inputs, whose replay is right; it is not run again alone, and says how to have
    every snapshot in its one run."""
    from tests.collecting.merge_test import _job

    checked, _ = _job(tmp_path / "first", 2, "later-wrong", heartbeat=_JAX_HEARTBEAT, named=False)
    assert checked.returncode == ExitCode.NOT_REPRODUCED, checked.stderr[-3000:]
    said = " ".join(checked.stderr.split())
    assert "this run was part 0 of 2 of a job (jax.distributed)" in said
    assert (
        "not running the program a second time to read later inputs: this run is part 0 of 2 "
        "of a job (jax.distributed), and a process of a job run again without its job would "
        "wait in jax.distributed.initialize for peers that never come; give --job-part I/N "
        "to keep XLA's snapshot of every execution in its one run" in said
    )
    assert "running the program again" not in said


@pytest.mark.jax
@pytest.mark.slow
def test_a_part_whose_job_ended_it_is_ended_and_says_so(tmp_path: Path) -> None:
    """job_step.py crash-1: process 1 crashes compiling the step; process 0 (which serves the
    job's coordination) loses it in the step's collective, then would wait for the job's
    heartbeat timeout. Its collect ends it once its output shows the job's end, and its part
    says the job ended it, as the judge says of such a part."""
    from tests.collecting.merge_test import _job

    survivor, crashed = _job(tmp_path / "crash", 2, "crash-1", heartbeat=_JAX_HEARTBEAT)
    assert crashed.returncode == ExitCode.OK, crashed.stderr[-3000:]
    assert survivor.returncode == ExitCode.NOT_REPRODUCED, survivor.stderr[-3000:]
    failure = survivor.manifest()["failure"]
    assert failure["peer"] and failure["stopped_by"] == "job", failure
    assert failure["signal"] == "SIGKILL"
    said = " ".join(survivor.stderr.split())
    assert "collect ended the program 3 s after its output showed that its job had ended it" in said
    assert "the program ended: " in said and "(its job ended it; collect then stopped it)" in said
    assert "this does not look like an XLA bug: another process of the job failed first" in said
    assert any(n.startswith("collect ended the program") for n in survivor.manifest()["notes"])


def test_the_job_grace_is_a_duration_of_zero_or_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xla_bugkit.collecting.options import CollectOptions, check_options

    out = tmp_path / "b.zip"
    check_options(["python", "x.py"], CollectOptions(output=out, job_grace=0.0))
    with pytest.raises(BugkitError, match="--job-grace must be 0 or more seconds, not -1"):
        check_options(["python", "x.py"], CollectOptions(output=out, job_grace=-1.0))
    argv = ["collect", "--job-grace", "soon", "-o", str(out), "--", "python", "x.py"]
    assert main(argv) == ExitCode.USAGE
    assert "--job-grace: not a duration: 'soon'" in capsys.readouterr().err
