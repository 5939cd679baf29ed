"""One part of a job that runs on several machines: which part this collect is, and the
output that names it, so the parts of one job never write over each other.

A cluster starts one ``collect`` per process (``srun xla-bugkit collect -o bundle.zip --
python train.py``), each told its place by the launcher's environment; ``--job-part I/N``
says it by hand. Every part's bundle then carries the part in its name
(``bundle.part-3-of-8.zip``) beside the others, on a shared file system too.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit.archive.naming import split_suffix
from xla_bugkit.errors import BugkitError

# The launchers' own words for a process's place in its job: (index variable, count variable).
# A Kubernetes indexed Job's pod knows its index (JOB_COMPLETION_INDEX) but not the job's
# size, and a Job of one pod has one too: it says --job-part "$JOB_COMPLETION_INDEX/N".
LAUNCHERS = (
    ("SLURM_PROCID", "SLURM_NTASKS"),  # srun
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI's mpirun
    ("PMI_RANK", "PMI_SIZE"),  # MPICH and Intel MPI
    ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES"),  # a Cloud TPU pod: --worker=all
)
_GIVEN = re.compile(r"(\d+)(?:/(\d+))?")


@dataclass(frozen=True)
class JobPart:
    """Part ``index`` (from 0) of a job of ``count`` parts (None: not known)."""

    index: int
    count: int | None
    source: str  # what said so: "SLURM_PROCID", "--job-part"

    @property
    def label(self) -> str:
        return f"part-{self.index}" + (f"-of-{self.count}" if self.count else "")

    def describe(self) -> str:
        of = f" of {self.count}" if self.count else ""
        return f"part {self.index}{of} of a job ({self.source})"

    def to_json(self, ended: float | None = None) -> dict[str, object]:
        """The manifest's ``job`` record; ``ended``: when the program ended (epoch seconds),
        which ``merge`` orders the parts by (who stopped first)."""
        record: dict[str, object] = {"part": self.index, "parts": self.count, "from": self.source}
        if ended is not None:
            record["ended"] = _dt.datetime.fromtimestamp(ended, _dt.UTC).isoformat(
                timespec="milliseconds"
            )
        record["host"] = host_id()
        return record


def cannot_run_alone(part: JobPart, *, every: bool) -> str:
    """Why a part's program does not run a second time (``every``: its one run kept XLA's
    snapshot of every execution, what the second would have added)."""
    why = (
        f"this run is {part.describe()}, and a process of a job run again without its job "
        "would wait in jax.distributed.initialize for peers that never come"
    )
    if every:
        return f"{why}; its one run kept XLA's snapshot of every execution instead"
    return f"{why}; give --job-part I/N to keep XLA's snapshot of every execution in its one run"


def every_snapshot_note(part: JobPart) -> str:
    """What the manifest says of the inputs a part's one run kept by default."""
    return (
        f"XLA's snapshot of every execution was kept in the one run (--snapshots every): "
        f"this run is {part.describe()}, which cannot run again without its job, so it "
        "takes what a second run would add"
    )


def host_id() -> str:
    """This machine, as the job's parts can tell it from another without naming it: a short
    hash of the host name (the name itself is private, and redacted from bundles)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:10]


def parse(text: str) -> JobPart:
    """``--job-part I/N`` (or ``I``): part I, from 0, of N."""
    m = _GIVEN.fullmatch(text.strip())
    if m is None:
        raise BugkitError(f"--job-part takes I/N (part I of N, from 0), not {text!r}")
    index, count = int(m.group(1)), int(m.group(2)) if m.group(2) else None
    if count is not None and not 0 <= index < count:
        raise BugkitError(f"--job-part {text}: the part must be from 0 to {count - 1}")
    return JobPart(index, count, "--job-part")


def detect(env: Mapping[str, str]) -> JobPart | None:
    """The part the launcher's environment gives this process; None outside a job of
    several parts (a batch job of one task is no job of parts)."""
    for index_name, count_name in LAUNCHERS:
        index = _number(env.get(index_name))
        if index is None:
            continue
        count = _count(env.get(count_name, ""), count_name)
        if count == 1:
            return None
        return JobPart(index, count, index_name)
    return None


def part_output(output: Path, part: JobPart) -> Path:
    """``output`` with the part in its name: ``bundle.zip`` -> ``bundle.part-3-of-8.zip``."""
    stem, suffix = split_suffix(output.name)
    return output.with_name(f"{stem}.{part.label}{suffix}")


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _count(value: str, name: str) -> int | None:
    if name == "TPU_WORKER_HOSTNAMES":  # the pod's hosts, comma-separated
        hosts = [h for h in value.split(",") if h.strip()]
        return len(hosts) or None
    return _number(value)
