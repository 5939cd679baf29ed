"""The manifest's JSON shape: the schema version, its file name, and a TypedDict per record."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from xla_bugkit.frameworks import FrameworkEntry

SCHEMA_VERSION = 1
MANIFEST_LIMIT = 16 << 20  # a manifest lists files; 16 MiB is far beyond any real one


class FileEntry(TypedDict):
    path: str
    size: int
    sha256: str


class ModuleEntry(TypedDict):
    label: str
    name: str
    id: int
    platform: str
    reasons: list[str]
    files: dict[str, str]  # role -> path in the bundle
    replay: dict[str, Any] | None
    # The XLA options the program passed to this module's compile, as flags (only when any).
    compiler_options: NotRequired[list[str]]


class ProcessEntry(TypedDict):
    """The process of the run that failed (a rank, a worker): where the modules come from."""

    pid: int
    rank: int | None
    processes: int | None  # jax.process_count() in that process
    devices: int | None  # the device count its backend had (sharded modules need as many)
    platform: str
    why: str  # why this process was taken as the failing one
    memory_cap: int | None  # an address-space limit the program set itself (bytes)


class OtherProcessEntry(TypedDict):
    pid: int
    rank: int | None
    ended: str


# Part ``part`` (from 0) of ``parts`` (null: not known), and what said so ("SLURM_PROCID");
# when its program ended (UTC, ms) and its machine (a short hash of the host name). A merged
# bundle's names the part that failed, and ``merged`` holds a summary of every part.
JobEntry = TypedDict(
    "JobEntry",
    {
        "part": int,
        "parts": int | None,
        "from": str,
        "ended": NotRequired[str],
        "host": NotRequired[str],
        "merged": NotRequired[list[dict[str, Any]]],
    },
)


class Manifest(TypedDict):
    schema: int
    tool: str
    title: str  # the suggested issue title
    created: str
    versions: dict[str, str]
    command: list[str]
    xla_flags: list[str]
    # The TPU compiler's flags the run set (LIBTPU_INIT_ARGS), redacted; absent when it set
    # none, and in bundles of older versions.
    libtpu_init_args: NotRequired[list[str]]
    exit_status: int | None
    failure: dict[str, Any]
    guess: bool
    modules: list[ModuleEntry]
    other_modules: int
    data: str  # "real inputs (snapshots)", "no input data (--no-data)", ...
    notes: list[str]
    files: list[FileEntry]
    framework: NotRequired[FrameworkEntry]  # absent in bundles of older versions
    job: NotRequired[JobEntry]  # one part of a job of several machines (``collect --job-part``)
    process: NotRequired[ProcessEntry]  # absent without the start-up hook's records
    other_processes: NotRequired[list[OtherProcessEntry]]
    shrink: NotRequired[dict[str, Any]]  # what ``xla-bugkit shrink`` found
    bisect: NotRequired[dict[str, Any]]  # what ``xla-bugkit bisect`` found across releases
    # Whose the failure is, as the title, ISSUE.md, the summary and the exit code say it:
    # {"whose": "xla" (proven by a replay outside the program) | "unproven" | "not xla",
    # "reason": one line}; absent in bundles of older versions.
    blame: NotRequired[dict[str, str]]
