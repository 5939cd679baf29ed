"""The few exception types, and the exit codes they map to."""

from __future__ import annotations

# Exit codes, listed in the README. Stable: scripts depend on them.
EXIT_OK = 0
EXIT_ERROR = 1  # a user-facing error (bad arguments, unreadable input, disk full, ...)
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_NOT_REPRODUCED = 3  # the bundle was made/opened, but the failure did not replay
EXIT_BAD_BUNDLE = 4  # the archive is corrupt, hostile, or fails its integrity check
EXIT_NO_FAILURE = 5  # collect: the program ran without failing
EXIT_INTERNAL = 70  # a bug in xla-bugkit itself (EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C


class BugkitError(Exception):
    """An error whose message is written for the user; maps to ``exit_code``."""

    exit_code = EXIT_ERROR


class BadBundleError(BugkitError):
    """The archive cannot be trusted or read: corrupt, hostile, or failing its hashes."""

    exit_code = EXIT_BAD_BUNDLE


class ProcessError(BugkitError):
    """A child process could not be started or controlled."""


class DiskFullError(BugkitError):
    """Writing failed for lack of space; the message names the path."""
