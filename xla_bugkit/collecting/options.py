"""What ``collect`` is asked to do (``CollectOptions``, checked before the program runs),
what its bundle rests on (``Findings``) and what it did (``CollectResult``)."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.archive.naming import suffix_format
from xla_bugkit.bundle import github
from xla_bugkit.bundle.output import check_output
from xla_bugkit.collecting.job import JobPart
from xla_bugkit.errors import BugkitError
from xla_bugkit.run import capture, job_end
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance

if TYPE_CHECKING:  # what runs after the program: imported while it runs (``warm``)
    from xla_bugkit.bundle.manifest import Manifest
    from xla_bugkit.bundle.triage import Triage
    from xla_bugkit.choose import dumps
    from xla_bugkit.choose.selection import Selection
    from xla_bugkit.run.record import RunRecord
    from xla_bugkit.verdict import Verdict


@dataclass(frozen=True)
class CollectOptions:
    """How ``collect`` runs; the defaults are the CLI's."""

    output: Path = Path(f"bundle.{config.DEFAULT_FORMAT}")
    fmt: str | None = None  # from the output's suffix when None
    timeout: float | None = None
    replay_timeout: float = config.REPLAY_TIMEOUT
    # Seconds to spend finding the module that computes a wrong value (differential replay).
    budget: float = config.SEARCH_BUDGET
    module_re: str | None = None
    symbol: str | None = None
    workdir: Path | None = None
    keep_workdir: bool = False
    always: bool = False  # bundle even when the program succeeds
    replay: bool = True
    data: bool = True  # ship snapshots (real inputs)
    limit: int = 3
    # Where the summary's new-issue link points; None: the framework's tracker (or openxla/xla).
    repo: str | None = None
    max_size: int | None = config.MAX_SIZE
    force: bool = False  # replace an existing output that is not an xla-bugkit bundle
    include_source: bool = False  # ship the command's main script, redacted
    shrink: str | None = None  # --shrink: the shrink's budget ("10m"); None: no shrink
    bisect: bool = False  # --bisect: then bisect the bundle over jaxlib releases
    wheels: Path | None = None  # --wheels: the bisect's releases from this folder of wheels
    bisect_python: str | None = None  # --bisect-python: for releases built for newer Pythons
    # --snapshots: each function's first inputs, or every execution's; None: first, and every
    # in a second run when a wrong result does not show on the first inputs.
    snapshots: str | None = None
    max_dump_size: int = capture.DEFAULT_BUDGET  # --max-dump-size: bytes of inputs a run keeps
    tolerance: Tolerance = DEFAULT_TOLERANCE  # --rtol/--atol: wrong results' bounds
    # --dump-passes: XLA dumps the module around each pass this matches; the chosen
    # module's pass dumps are bundled, within the size budget.
    dump_passes: str | None = None
    # --job-part, or the launcher's environment: this collect is one part of a job of several
    # machines (its output's name already says which).
    job_part: JobPart | None = None
    # --job-grace: seconds a job's part whose job has ended it may go on before it is ended.
    job_grace: float = job_end.GRACE

    @property
    def capture(self) -> capture.Capture:
        """How the run keeps inputs: as ``--snapshots`` says; by default each function's
        first call, or, for a part of a job (which cannot run again without its job),
        every execution's, which a second run would otherwise add."""
        default = capture.EVERY if self.job_part is not None else capture.FIRST
        return capture.Capture(self.snapshots or default, self.max_dump_size)


@dataclass(frozen=True)
class CollectResult:
    """What ``collect`` did. ``exit_code`` is what the CLI returns."""

    exit_code: int
    run: RunRecord
    selection: Selection  # empty when nothing was bundled
    verdicts: tuple[Verdict, ...] = ()
    bundle: Path | None = None
    size: int = 0
    notes: tuple[str, ...] = field(default=())
    manifest: Manifest | None = None
    fmt: str = config.DEFAULT_FORMAT
    workdir: Path | None = None  # the work dir, when it was kept (``rebundle`` reads it)
    user_dumps: Path | None = None  # the dumps of the user's own --xla_dump_to, moved here
    replay_interrupted: bool = False  # Ctrl-C stopped the replay stage
    judged: Triage | None = None  # whether it looks like XLA's bug, and why (None: no bundle)
    tracker: str | None = None  # where its issue goes ("owner/name")
    own_flags: str | None = None  # the run's own XLA flags as a cause (``own_flags``)
    across_releases: str | None = None  # ``--bisect``'s answer ("fails on every release ...")


@dataclass(frozen=True)
class Dumps:
    """The run's dump index, without the files XLA failed to write (``problems`` says so)."""

    index: dumps.DumpIndex
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Findings:
    """What a bundle rests on, once the modules are replayed: the run, its dumps and the
    notes on them, the modules chosen, their verdicts, and where the replays' arrays are
    kept (a subfolder per module; None: none kept)."""

    found: Dumps
    selection: Selection
    run: RunRecord
    verdicts: tuple[Verdict, ...] = ()
    arrays: Path | None = None


def check_options(command: Sequence[str], options: CollectOptions) -> str:
    """Everything that can be checked before the program runs; returns the archive format.

    A run may take hours: a bad option found after it would waste it.
    """
    if not command:
        raise BugkitError("nothing to run: give the command after --, e.g. collect -- python x.py")
    if options.repo is not None:
        github.check_repo(options.repo)
    if not math.isfinite(options.budget) or options.budget <= 0:
        raise BugkitError(f"--budget must be a positive number of seconds, not {options.budget:g}")
    _check_regex("--module", options.module_re)
    _check_regex("--dump-passes", options.dump_passes)
    passes = options.dump_passes
    if passes is not None and (not passes or any(c.isspace() for c in passes)):
        raise BugkitError(
            "--dump-passes takes a non-empty regular expression without spaces "
            "(XLA_FLAGS is split at spaces): use \\s or . instead"
        )
    if options.shrink is not None:
        config.parse_budget(options.shrink)
    if options.snapshots is not None and options.snapshots not in capture.MODES:
        raise BugkitError(f"--snapshots must be one of {', '.join(capture.MODES)}")
    if not math.isfinite(options.job_grace) or options.job_grace < 0:
        raise BugkitError(f"--job-grace must be 0 or more seconds, not {options.job_grace:g}")
    if options.max_dump_size <= 0:
        raise BugkitError("--max-dump-size must be above 0")
    for flag, given in (("--wheels", options.wheels), ("--bisect-python", options.bisect_python)):
        if given is not None and not options.bisect:
            raise BugkitError(f"{flag} goes with --bisect (the releases a bisect takes)")
    if options.wheels is not None and not options.wheels.is_dir():
        raise BugkitError(f"--wheels {options.wheels}: not a folder")
    return check_output(options.output, options.fmt, force=options.force)


def _check_regex(flag: str, value: str | None) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as e:
        raise BugkitError(f"{flag} {value!r} is not a regular expression ({e})") from None


def rebundle_command(work: Path, options: CollectOptions) -> str:
    """The ``xla-bugkit bundle`` command line that makes the bundle ``options`` describe."""
    argv = ["xla-bugkit", "bundle", str(work), "-o", str(options.output)]
    if options.fmt is not None and suffix_format(options.output) is None:
        argv += ["--format", options.fmt]
    if options.module_re is not None:
        argv += ["--module", options.module_re]
    if options.symbol is not None:
        argv += ["--symbol", options.symbol]
    if options.budget != config.SEARCH_BUDGET:
        argv += ["--budget", f"{options.budget:g}"]
    if options.max_size is not None and options.max_size != config.MAX_SIZE:
        argv += ["--max-size", f"{options.max_size}B"]
    argv += [] if options.replay else ["--no-replay"]
    argv += [] if options.data else ["--no-data"]
    return shlex.join(argv)
