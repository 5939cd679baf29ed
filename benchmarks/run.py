"""Benchmark xla-bugkit against what users do by hand; write ``benchmarks/RESULTS.md``.

    PYTHONPATH=. python benchmarks/run.py [--work DIR] [--out FILE] [--smoke]

Builds its inputs (a real dump of ``many_functions.py`` with ~220 jitted functions, and a
>= 1 GB tree made of renumbered copies of it; both cached under ``--work``), then measures:

- P1 ``collect`` against running the program by hand with the same dump flags;
- P2 indexing and ``--symbol`` search of the large tree against ``rg``;
- P3 bundle size and time against ``7z a -mx=9`` and ``tar czf``, and peak memory;
- P4 ``verify`` against the module's own compile + run.

``--smoke`` runs every stage on a tiny input in well under a minute (for the test suite).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PARTS = ("training", "p1", "p2", "p3", "p4")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--work",
        type=Path,
        default=BENCH / ".work",
        help="where inputs are cached (default benchmarks/.work)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="the table to write (default benchmarks/RESULTS.md; WORK/RESULTS.md with --smoke)",
    )
    p.add_argument("--smoke", action="store_true", help="tiny inputs, every stage, < 1 minute")
    p.add_argument("--count", type=int, help="jitted functions in the program (220; smoke 5)")
    p.add_argument("--large-gb", type=float, default=1.0, help="size of the large tree (1.0)")
    p.add_argument("--reps", type=int, help="repetitions of fast measurements (3; smoke 1)")
    p.add_argument(
        "--only",
        action="append",
        choices=PARTS,
        help="run only this part (repeatable): training = P1 on training_program.py",
    )
    return p.parse_args(argv)


def _importable() -> None:
    # Benchmarks run from a checkout: make xla_bugkit importable without installing it.
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))


def _reproduce(argv: list[str]) -> str:
    return (
        "apt-get install -y ripgrep 7zip   # rg and 7zz, the baselines\n"
        "# from the repository root, with xla-bugkit installed (pip install -e '.[test]'):\n"
        f"python benchmarks/run.py {shlex.join(_figures_only(argv))}"
    ).rstrip()


def _figures_only(argv: list[str]) -> list[str]:
    """``argv`` less where this machine keeps its inputs and output (``--work``, ``--out``):
    they change no figure, and a reader's machine has its own."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--work", "--out"):
            skip = True
        elif not arg.startswith(("--work=", "--out=")):
            kept.append(arg)
    return kept


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _importable()
    from _common import Config, compile_bytecode
    from _report import render
    from _suite import measure

    compile_bytecode()

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cfg = Config(
        work=work,
        out=(args.out or (work / "RESULTS.md" if args.smoke else BENCH / "RESULTS.md")).resolve(),
        smoke=args.smoke,
        count=args.count or (5 if args.smoke else 220),
        large_bytes=int(args.large_gb * 1e9),
        reps=args.reps or (1 if args.smoke else 3),
        only=frozenset(args.only or ()),
    )
    report = measure(cfg, _reproduce(sys.argv[1:] if argv is None else argv))
    tmp = cfg.out.with_name(f".{cfg.out.name}.partial")
    tmp.write_text(render(report), "utf-8")
    os.replace(tmp, cfg.out)  # a reader never sees half a table
    print(f"wrote {cfg.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
