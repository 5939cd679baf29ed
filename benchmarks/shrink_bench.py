"""Probes per second for ``xla-bugkit shrink``: forked from the probe server vs fresh processes.

    PYTHONPATH=. python benchmarks/shrink_bench.py [--probes N] [--fresh N] [--no-shrink]

Dumps ``tests/shrink/programs/log_exp_big.py`` (a real algebraic-simplifier wrong result in
a ~380-instruction module), then times the same probe (parse, compile, run the module) as a
child of the probe server and as a fresh Python process, for the whole module and for the
3-instruction module it shrinks to; then one whole shrink. Writes its section of
``benchmarks/RESULTS.md`` (between the ``shrink_bench`` markers). Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from xla_bugkit.replay import protocol  # noqa: E402
from xla_bugkit.replay.inputs import dump_modules, module_files, replay_input  # noqa: E402
from xla_bugkit.shrink import hlo_text  # noqa: E402
from xla_bugkit.shrink.probe import ForkServer, run_fresh  # noqa: E402
from xla_bugkit.shrink.shrinker import shrink  # noqa: E402
from xla_bugkit.ui import Ui  # noqa: E402

PROGRAM = REPO / "tests" / "shrink" / "programs" / "log_exp_big.py"
SMALL = """HloModule small

ENTRY main {
  y = f32[4] parameter(0)
  e = f32[4] exponential(y)
  ROOT l = f32[4] log(e)
}
"""
BEGIN, END = "<!-- shrink_bench: begin -->", "<!-- shrink_bench: end -->"


def _dump(work: Path) -> Path:
    dump = work / "dump"
    flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    subprocess.run([sys.executable, str(PROGRAM)], env=env, capture_output=True, check=False)
    return dump


def _text(server: ForkServer, hlo: Path, work: Path) -> str:
    server.run(work / "text", {"task": "text", "hlo": str(hlo)}, xla_flags="", timeout=300)
    return (work / "text" / "module.hlo").read_text()


def _spec(folder: Path, text: str, args: list) -> dict:  # type: ignore[type-arg]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "in.hlo").write_text(text)
    protocol.save_arrays(folder / "args.npz", args)
    return {"task": "run", "hlo": str(folder / "in.hlo"), "args": str(folder / "args.npz"),
            "platform": "cpu", "overrides": []}  # fmt: skip


def _time(run, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for i in range(n):
        started = time.monotonic()
        run(i)
        times.append(time.monotonic() - started)
    return times


def _row(name: str, fork: list[float], fresh: list[float]) -> str:
    f, s = statistics.median(fork), statistics.median(fresh)
    return (f"| {name} | {f:.2f} s ({1 / f:.1f}/s) | {s:.2f} s ({1 / s:.2f}/s) | "
            f"{s / f:.0f}x | {len(fork)} / {len(fresh)} |")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probes", type=int, default=10, help="fork-server probes per module")
    p.add_argument("--fresh", type=int, default=3, help="fresh-process probes per module")
    p.add_argument("--no-shrink", action="store_true", help="skip the whole-shrink row")
    p.add_argument("--out", type=Path, default=BENCH / "RESULTS.md")
    args = p.parse_args()
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="shrink-bench-") as tmp:
        work = Path(tmp)
        ((root, module),) = dump_modules(_dump(work), r"jit_f$")
        inp = replay_input(module.label, module_files(root, module), module.platform)
        assert inp is not None
        started = time.monotonic()
        with ForkServer() as server:
            start = time.monotonic() - started
            big = hlo_text.parse(_text(server, inp.hlo, work))
            import numpy as np

            rng = np.random.default_rng(0)
            cases = {
                f"whole module ({big.instruction_count()} instructions)": (
                    big.text(), [rng.standard_normal((4, 8)).astype(np.float32)] * 2),
                "shrunk module (3 instructions)": (
                    SMALL, [np.full(4, 100.0, np.float32)]),
            }  # fmt: skip
            for name, (text, arrays) in cases.items():
                spec = _spec(work / name[:5], text, arrays)
                fork = _time(lambda i: server.run(work / f"f{i}", spec, xla_flags="",  # noqa: B023
                                                  timeout=300), args.probes)  # fmt: skip
                fresh = _time(lambda i: run_fresh(work / f"s{i}", spec, xla_flags="",  # noqa: B023
                                                  timeout=300), args.fresh)  # fmt: skip
                rows.append(_row(name, fork, fresh))
        shrunk_line = ""
        if not args.no_shrink:
            result = shrink(inp, None, work / "shrink", ui=Ui(verbosity=-1)).result
            shrunk_line = (
                f"\nWhole shrink of that module (default budget, 3 confirming replays first): "
                f"{result.instructions_before} → {result.instructions_after} instructions "
                f"({result.instructions_after / result.instructions_before:.1%}), "
                f"{result.probes} probes in {result.seconds:.0f} s; culprit: "
                f"{result.culprit.sentence() if result.culprit else 'none'}.\n"
            )
    section = "\n".join([
        BEGIN, "", "## Shrink probes (`benchmarks/shrink_bench.py`)", "",
        f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. One probe = parse, "
        "compile and run one module in a child; medians. The probe server took "
        f"{start:.1f} s to start (it imports jax once).", "",
        "| Probe | fork server | fresh process | Ratio | Runs (fork / fresh) |",
        "| --- | --- | --- | --- | --- |", *rows, shrunk_line, END,
    ])  # fmt: skip
    old = args.out.read_text() if args.out.exists() else ""
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + section + old[old.index(END) + len(END) :]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    args.out.write_text(new)
    print(section)


if __name__ == "__main__":
    main()
