"""The few exception types, and the one table of exit codes (the CLI help and
docs/exit-codes.md follow it)."""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    """Every exit code the CLI returns. Stable: scripts depend on them."""

    OK = 0
    ERROR = 1  # a user-facing error (bad arguments, unreadable input, disk full, ...)
    USAGE = 2  # argparse's own code for a bad command line
    NOT_REPRODUCED = 3  # the bundle was made/opened, but the failure did not replay
    BAD_BUNDLE = 4  # the archive is corrupt, hostile, or fails its integrity check
    NO_FAILURE = 5  # collect: the program ran without failing
    UNVERIFIED = 6  # verify: the bundle needs a platform this machine lacks (a GPU)
    INTERNAL = 70  # a bug in xla-bugkit itself (EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl-C


# What to do about an install that lacks a module of its own (main's handler, doctor).
REINSTALL = (
    "reinstall it: python -m pip install --force-reinstall xla-bugkit (from a clone: "
    "python -m pip install --force-reinstall .; with pipx: pipx reinstall xla-bugkit)"
)

# What each code means, for the table in docs/exit-codes.md (a test keeps the two equal).
MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "`collect`: bundle written, and a replay outside the program reproduced a "
    "failure that points at XLA; `verify`: the "
    "recorded failure reproduces here; `replay`: the module failed; `shrink`: the shrunk module "
    "fails the same way",
    ExitCode.ERROR: "an error, explained in one line (bad arguments, unreadable input, disk "
    "full, ...)",
    ExitCode.USAGE: "a bad command line",
    ExitCode.NOT_REPRODUCED: "bundle written or opened, but the failure did not reproduce "
    "(`collect`: or it did and is not XLA's doing)",
    ExitCode.BAD_BUNDLE: "the bundle is corrupt, hostile, or fails its integrity check",
    ExitCode.NO_FAILURE: '`collect`: the program ran without failing ("no failure seen")',
    ExitCode.UNVERIFIED: "`verify`: the bundle's modules need a platform this machine lacks (a "
    "GPU or TPU bundle on a CPU-only machine), or none can be replayed outside the reporter's "
    "program (a host callback), or the call that hung ran on inputs the reporter's run could not "
    "record: unverified, neither reproduced nor not; `bisect`: a TPU bundle on a machine "
    "without a TPU",
    ExitCode.INTERNAL: "a bug in xla-bugkit itself (the traceback goes to a log file it names)",
    ExitCode.INTERRUPTED: "interrupted",
}

# What each code means for one command, in the order its help lists them.
COMMAND_MEANINGS: dict[str, dict[ExitCode, str]] = {
    "collect": {
        ExitCode.OK: "bundle written, and a replay outside the program reproduced a failure "
        "that points at XLA",
        ExitCode.NOT_REPRODUCED: "bundle written, not shown to be XLA's (not reproduced, or "
        "reproduced and not XLA's doing); or the program failed "
        "before XLA compiled anything (no bundle: nothing of XLA's to replay)",
        ExitCode.NO_FAILURE: "no failure seen",
        ExitCode.ERROR: "error",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "bundle": {
        ExitCode.OK: "bundle written, and a replay outside the program reproduced a failure "
        "that points at XLA",
        ExitCode.NOT_REPRODUCED: "bundle written, not shown to be XLA's (not reproduced, or "
        "reproduced and not XLA's doing)",
        ExitCode.NO_FAILURE: "bundle written of a run that did not fail",
        ExitCode.ERROR: "error",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "verify": {
        ExitCode.OK: "the recorded failure reproduces here",
        ExitCode.NOT_REPRODUCED: "it does not",
        ExitCode.UNVERIFIED: "unverified: the modules need a platform this machine lacks, "
        "none can be replayed here, or the hung call's inputs were not recorded",
        ExitCode.BAD_BUNDLE: "the bundle is corrupt, hostile or fails its integrity check",
        ExitCode.ERROR: "other errors",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "replay": {
        ExitCode.OK: "the module failed (crash, error, hang or wrong result)",
        ExitCode.NOT_REPRODUCED: "it ran and matched its references",
        ExitCode.ERROR: "other errors",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "bisect": {
        ExitCode.OK: "some release fails the recorded way (the result says which)",
        ExitCode.NOT_REPRODUCED: "no release tried does",
        ExitCode.UNVERIFIED: "the module needs a device this machine lacks (a TPU)",
        ExitCode.BAD_BUNDLE: "the bundle is corrupt, hostile or fails its integrity check",
        ExitCode.ERROR: "other errors",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "show": {
        ExitCode.OK: "listed",
        ExitCode.BAD_BUNDLE: "not a readable xla-bugkit bundle",
        ExitCode.ERROR: "other errors",
    },
    "shrink": {
        ExitCode.OK: "shrunk, and the shrunk module fails the same way through replay",
        ExitCode.NOT_REPRODUCED: "the module does not fail (reliably) here, or the shrunk "
        "one did not replay the same way (the bundle is written without it)",
        ExitCode.BAD_BUNDLE: "the bundle is corrupt, hostile or fails its integrity check",
        ExitCode.ERROR: "other errors",
        ExitCode.INTERRUPTED: "interrupted",
    },
    "merge": {
        ExitCode.OK: "written, and the part it is judged by failed inside XLA and reproduced (by "
        "the part's replay, or by merge's on the inputs it stitched from every part)",
        ExitCode.NOT_REPRODUCED: "written, but no part's failure reproduced (or none is XLA's)",
        ExitCode.BAD_BUNDLE: "a part is corrupt, hostile or fails its integrity check",
        ExitCode.NO_FAILURE: "written, but no part of the job failed",
        ExitCode.ERROR: "other errors (parts of different jobs, two parts in one place)",
    },
    "repack": {
        ExitCode.OK: "written",
        ExitCode.BAD_BUNDLE: "the bundle is corrupt, hostile or fails its integrity check",
        ExitCode.ERROR: "other errors",
    },
    "cache": {
        ExitCode.OK: "listed or cleared",
        ExitCode.ERROR: "the cache or its limit cannot be read",
    },
    "doctor": {
        ExitCode.OK: "the installation is whole",
        ExitCode.ERROR: "a module, data file or dependency is missing",
    },
    "convert": {
        ExitCode.OK: "written",
        ExitCode.ERROR: "the input is no module jaxlib reads, or OUT cannot be written",
        ExitCode.INTERRUPTED: "interrupted",
    },
}


def exit_codes_help(command: str) -> str:
    """The ``exit codes:`` paragraph of one command's help, from ``COMMAND_MEANINGS``."""
    codes = "; ".join(f"{int(code)} {text}" for code, text in COMMAND_MEANINGS[command].items())
    return f"exit codes: {codes}."


# errno values that mean "no room left": the disk, or the user's quota.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class BugkitError(Exception):
    """An error whose message is written for the user; maps to ``exit_code``."""

    exit_code = ExitCode.ERROR


class RerunNeeded(BugkitError):
    """What the run left cannot give a bundle, however it is read again: only another run of
    the program can (it replaced collect's XLA_FLAGS, say)."""


class BadBundleError(BugkitError):
    """The archive cannot be trusted or read: corrupt, hostile, or failing its hashes."""

    exit_code = ExitCode.BAD_BUNDLE


class NeedsDevice(BugkitError):
    """The module needs a device this machine lacks (a TPU bundle's bisect): nothing was
    tried, so nothing is said of the failure."""

    exit_code = ExitCode.UNVERIFIED


class ProcessError(BugkitError):
    """A child process could not be started or controlled."""


class DiskFullError(BugkitError):
    """Writing failed for lack of space; the message names the path."""
