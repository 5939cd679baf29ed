"""Command line: parse (``cli``), dispatch to ``xla_bugkit.commands``, map errors to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import NoReturn

from xla_bugkit import config, proc
from xla_bugkit.cli import collect, grammar, options
from xla_bugkit.errors import REINSTALL, BugkitError, ExitCode
from xla_bugkit.ui import Ui, shown


def _dispatch(args: argparse.Namespace, ui: Ui) -> int:
    if args.command == "collect":
        from xla_bugkit.commands.collect import collect_command

        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            return _bad_command_line(
                "nothing to run: give the command after --, e.g. collect -- python x.py"
            )
        return collect_command(cmd, collect.collect_options(args, config.load()), ui)
    if args.command == "bundle":
        from xla_bugkit.commands import bundle

        return bundle.bundle_command(args.workdir, collect.collect_options(args, config.load()), ui)
    if args.command == "verify":
        from xla_bugkit.commands.verify import verify

        return verify(
            args.bundle,
            json_output=args.json,
            timeout=args.timeout,
            ui=ui,
            tolerance=options.tolerance(args),
            fake_data=args.fake_data,
            jaxlib=args.jaxlib,
            wheels=args.wheels,
            python=args.python,
        )
    if args.command == "repack":
        from xla_bugkit.commands.repack import repack

        return repack(args.bundle, args.out, force=args.force, ui=ui)
    if args.command == "shrink":
        from xla_bugkit.commands.shrink import shrink_command

        return shrink_command(
            args.target,
            out=args.output,
            module_re=args.module_re,
            budget=args.budget,
            max_probes=args.max_probes,
            only=args.only,
            timeout=args.timeout,
            probe_timeout=args.probe_timeout,
            force=args.force,
            json_output=args.json,
            ui=ui,
        )
    if args.command == "bisect":
        from xla_bugkit.bisect.run import Range
        from xla_bugkit.commands.bisect import bisect_command

        return bisect_command(
            args.bundle,
            Range(args.wheels, args.low, args.high, args.python),
            out=args.output,
            force=args.force,
            timeout=args.timeout,
            tolerance=options.tolerance(args),
            module_re=args.module_re,
            json_output=args.json,
            ui=ui,
        )
    if args.command == "convert":
        from xla_bugkit.commands.convert import convert_command

        return convert_command(args.source, args.out, to=args.to, force=args.force, ui=ui)
    if args.command == "cache":
        from xla_bugkit.commands.cache import cache_command

        return cache_command(clear=args.clear, ui=ui)
    if args.command == "doctor":
        from xla_bugkit.commands.doctor import doctor_command

        return doctor_command(json_output=args.json)
    if args.command == "show":
        from xla_bugkit.commands.show import show

        return show(
            args.bundle,
            json_output=args.json,
            issue=args.issue,
            graph=args.graph,
            module_re=args.module_re,
            force=args.force,
        )
    from xla_bugkit.commands.replay import replay_command

    return replay_command(
        args.target,
        module_re=args.module_re,
        snapshot=args.snapshot,
        platform=args.platform,
        flags=args.flags,
        timeout=args.timeout,
        json_output=args.json,
        ui=ui,
        tolerance=options.tolerance(args),
        fake_data=args.fake_data,
    )


def entry() -> NoReturn:
    """The console script: ``main``, then out at once. What the interpreter would do at
    its exit, tearing every module down (numpy's and protobuf's included: ~30 ms after a
    collect), changes nothing by then: every file is closed and every temporary folder
    removed; what is left is to flush the output."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone away (`| head`) lost nothing
            stream.flush()
    os._exit(code)


def _bad_command_line(message: str) -> int:
    """What argparse finds wrong, found after it: one line, and its exit code."""
    print(f"xla-bugkit: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


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
            return _dispatch(args, ui)
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
