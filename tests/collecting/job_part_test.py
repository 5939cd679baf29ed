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
