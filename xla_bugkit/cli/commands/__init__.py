"""One module per subcommand: its ``HELP``, ``DESCRIPTION`` and ``EPILOG``, its options
(``add_arguments``) and its work (``run(args, ui)``, which returns the exit code).

The parser is built from every one of them before any command runs, so each is light at
import: what a command runs (replays, bundles, numpy) it imports in ``run``.
"""
