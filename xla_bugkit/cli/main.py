"""Command line: parse (``grammar``), run the chosen command (``cli.commands``), map errors to
exit codes."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import NoReturn

from xla_bugkit import proc
from xla_bugkit.cli import grammar
from xla_bugkit.errors import REINSTALL, BugkitError, ExitCode
from xla_bugkit.ui import Ui, shown


def entry() -> NoReturn:
    """The console script: ``main``, then out at once. What the interpreter would do at
    its exit, tearing every module down (numpy's and protobuf's included: ~30 ms after a
    collect), changes nothing by then: every file is closed; what is left is to remove what
    the exit functions remove (the folders lent to a replay child under another
    interpreter) and to flush the output."""
    code = main()
    # Public registration, private run: os._exit skips them, and nothing else runs them.
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone away (`| head`) lost nothing
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (listed in docs/exit-codes.md)."""
    parser = grammar.parser()
    try:
        args = parser.parse_args(grammar.attach_flags(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:  # argparse exits on --help and on usage errors
        return int(e.code) if isinstance(e.code, int) else ExitCode.USAGE
    ui = Ui(verbosity=args.verbose - args.quiet)
    try:
        # SIGTERM and SIGHUP unwind like Ctrl-C, so temporary folders are removed.
        with proc.sigterm_as_interrupt():
            return grammar.COMMANDS[args.command].run(args, ui)
    except BugkitError as e:  # it may quote a stranger's bundle: nothing a terminal acts on
        print(f"xla-bugkit: error: {shown(str(e))}", file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt:
        print("xla-bugkit: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not an error of ours or theirs.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ImportError as e:
        if (e.name or "").startswith("xla_bugkit") or "xla_bugkit" in str(e):
            return _incomplete(e)
        return _internal_error()
    except Exception:
        return _internal_error()


def _incomplete(e: ImportError) -> int:
    """A module of xla-bugkit's own is missing: the install is broken, not the program."""
    print(
        f"xla-bugkit: error: this installation of xla-bugkit is incomplete ({e}); {REINSTALL}; "
        "then xla-bugkit doctor checks it",
        file=sys.stderr,
    )
    return ExitCode.INTERNAL


def _internal_error() -> int:
    """A bug in xla-bugkit: a short message, and the traceback in a file to attach."""
    with tempfile.NamedTemporaryFile(
        "w", prefix="xla-bugkit-crash-", suffix=".log", delete=False
    ) as f:
        traceback.print_exc(file=f)
    print(
        f"xla-bugkit: internal error (a bug in xla-bugkit, not in your program); "
        f"details in {f.name}",
        file=sys.stderr,
    )
    return ExitCode.INTERNAL
