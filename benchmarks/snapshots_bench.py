"""collect on a training loop against the bare program: wall time and the work dir's peak.

    python benchmarks/snapshots_bench.py [--rounds 2] [--out benchmarks/SNAPSHOTS.md]
    python benchmarks/snapshots_bench.py --pairs 8 [--steps 100 --mb 16]

For each case (steps x state size) it runs, interleaved round by round (ABC, then CBA, so
drift on a shared machine lands on every side): the bare program; ``collect --no-replay
--always`` as it is by default (the hook keeps each function's first arguments);
``collect --snapshots every`` (XLA's snapshot of every execution, pruned); and, where the
disk allows, the program by hand with XLA's dump flags (what users do without xla-bugkit).
A sampling thread records the largest size the run's folder reached.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from _common import compile_bytecode

BENCH = Path(__file__).resolve().parent
LOOP = BENCH / "loop_program.py"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))
DUMP_FLAGS = (
    "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots "
    "--xla_dump_large_constants"
)
# (steps, state MB, by hand with the dump flags too): by hand, 1,000 steps of 16 MB would
# write 33 GB, and 100 steps of 256 MB 27 GB: not run.
CASES = ((100, 16, True), (1000, 16, False), (100, 256, False))


def size_of(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):  # gone while we looked
                total += os.lstat(os.path.join(root, name)).st_size
    return total


class Peak:
    """The largest size ``folder`` reaches while the block runs."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak = folder, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, size_of(self.folder))

    def _run(self) -> None:
        while not self._done.wait(0.25):
            self.peak = max(self.peak, size_of(self.folder))


def run(argv: Sequence[str], env: dict[str, str], folder: Path) -> tuple[float, int]:
    """Wall time of ``argv`` and the peak size of ``folder`` meanwhile."""
    folder.mkdir(parents=True, exist_ok=True)
    # What the previous side wrote (GBs by hand with the dump flags) is flushed first, not
    # while this one runs.
    os.sync()
    with Peak(folder) as peak:
        started = time.perf_counter()
        done = subprocess.run(list(argv), env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 5):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return wall, peak.peak


def measure(steps: int, mb: int, by_hand: bool, rounds: int, base: Path) -> dict[str, list]:
    program = [sys.executable, str(LOOP), str(steps), str(mb)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    sides = {
        "bare": lambda w: run(program, env, w),
        "collect": lambda w: run(
            [XLA_BUGKIT, "collect", "-q", "--always", "--no-replay", "--workdir", str(w / "work"),
             "-o", str(w / "b.7z"), "--", *program], env, w),
        "collect --snapshots every": lambda w: run(
            [XLA_BUGKIT, "collect", "-q", "--always", "--no-replay", "--snapshots", "every",
             "--workdir", str(w / "work"), "-o", str(w / "b.7z"), "--", *program], env, w),
    }  # fmt: skip
    if by_hand:
        flags = f"--xla_dump_to={base / 'hand' / 'dump'} {DUMP_FLAGS}"
        sides["by hand with dump flags"] = lambda w: run(
            program, {**env, "XLA_FLAGS": flags.replace(str(base / "hand"), str(w))}, w
        )
    results: dict[str, list] = {name: [] for name in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            where = base / f"{name.replace(' ', '_')}-{r}"
            results[name].append(sides[name](where))
            shutil.rmtree(where, ignore_errors=True)
    return results


def pairs(n: int, base: Path, steps: int = 100, mb: int = 16) -> str:
    """``n`` bare/collect pairs (the order alternating), each pair's ratio taken: the median
    of those, where the machine's drift between pairs cancels."""
    program = [sys.executable, str(LOOP), str(steps), str(mb)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    collect = [XLA_BUGKIT, "collect", "-q", "--always", "--no-replay", "--workdir"]
    ratios, extra = [], []
    for i in range(n):
        wall = {}
        for side in ("bare", "collect") if i % 2 == 0 else ("collect", "bare"):
            where = base / f"pair-{i}-{side}"
            argv = program if side == "bare" else [*collect, str(where / "work"), "-o",
                                                  str(where / "b.7z"), "--", *program]  # fmt: skip
            wall[side] = run(argv, env, where)[0]
            shutil.rmtree(where, ignore_errors=True)
        ratios.append(wall["collect"] / wall["bare"])
        extra.append(wall["collect"] - wall["bare"])
    return (
        f"{n} pairs of {steps} x {mb} MB: median ratio {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}x to {max(ratios):.2f}x), collect "
        f"{statistics.median(extra):.2f} s longer than the bare program"
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=BENCH / "SNAPSHOTS.md")
    p.add_argument("--pairs", type=int, help="only N bare/collect pairs (100 x 16 MB)")
    p.add_argument("--steps", type=int, default=100, help="the pairs' steps")
    p.add_argument("--mb", type=int, default=16, help="the pairs' state size in MB")
    args = p.parse_args()
    compile_bytecode()
    if args.pairs:
        with tempfile.TemporaryDirectory(prefix="snapshots-bench-") as tmp:
            print(pairs(args.pairs, Path(tmp), args.steps, args.mb))
        return
    lines = [
        "| steps x state | bare | collect (default) | ratio | collect --snapshots every | ratio "
        "| by hand with dump flags | ratio | work dir peak: collect / every / by hand |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="snapshots-bench-") as tmp:
        for steps, mb, by_hand in CASES:
            r = measure(steps, mb, by_hand, args.rounds if steps * mb <= 1600 else 1, Path(tmp))
            wall = {k: statistics.median(w for w, _ in v) for k, v in r.items()}
            peak = {k: max(s for _, s in v) for k, v in r.items()}
            hand = wall.get("by hand with dump flags")
            cells = [
                f"{steps} x {mb} MB",
                f"{wall['bare']:.1f} s",
                f"{wall['collect']:.1f} s",
                f"{wall['collect'] / wall['bare']:.2f}x",
                f"{wall['collect --snapshots every']:.1f} s",
                f"{wall['collect --snapshots every'] / wall['bare']:.2f}x",
                f"{hand:.1f} s" if hand else "not run",
                f"{hand / wall['bare']:.2f}x" if hand else "",
                " / ".join(
                    f"{peak[k] / 1e6:,.0f} MB" if k in peak else "—"
                    for k in ("collect", "collect --snapshots every", "by hand with dump flags")
                ),
            ]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
