"""``xla-bugkit merge`` on the parts of a real job, beside what a user would do by hand.

    python benchmarks/merge_bench.py [--parts 8] [--rounds 5]

First (once; kept under benchmarks/.work/merge-N/) a ``jax.distributed`` job of N processes on
this machine (tests/programs/job_step.py, CPU and gloo, one device each), each process under
its own ``xla-bugkit collect --job-part I/N`` as ``srun`` starts them: process 3 crashes inside
XLA compiling the step, the others are taken down by the job. Then, in interleaved rounds:
``merge`` of the N parts, and by hand: every part unpacked into a folder of its own and the
folders packed into one zip (``unzip`` and ``zip -r``, or Python's zipfile where those are
missing). The table goes to benchmarks/MERGE.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
JOB = REPO / "tests" / "programs" / "job_step.py"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))
FAILING = 3


def _env() -> dict[str, str]:
    skip = ("JAX_", "XLA_", "LIBTPU_", "TPU_", "TF_CPP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    return {**env, "JAX_PLATFORMS": "cpu", "JOB_STEP_HEARTBEAT": "10"}


def make_parts(folder: Path, count: int) -> list[Path]:
    parts = [folder / f"bundle.part-{i}-of-{count}.zip" for i in range(count)]
    if all(p.is_file() for p in parts):
        return parts
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    children = []
    for i in range(count):
        command = [XLA_BUGKIT, "collect", "--timeout", "900", "--job-part", f"{i}/{count}",
                   "-o", str(folder / "bundle.zip"), "--", sys.executable, str(JOB), str(i),
                   str(count), port, f"crash-{FAILING}", "1"]  # fmt: skip
        with (folder / f"collect{i}.log").open("w") as log:
            children.append(subprocess.Popen(command, stdout=log, stderr=log, env=_env()))
    for child in children:
        child.wait()
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise SystemExit(f"the job wrote no {', '.join(missing)}: see {folder}/collect*.log")
    return parts


def by_hand(parts: list[Path], work: Path) -> Path:
    """Each part unpacked into a folder of its own, the folders packed into one zip."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out = work.parent / f"{work.name}.zip"
    out.unlink(missing_ok=True)
    if shutil.which("unzip") and shutil.which("zip"):
        for part in parts:
            subprocess.run(["unzip", "-q", str(part), "-d", str(work / part.stem)], check=True)
        subprocess.run(["zip", "-q", "-r", str(out), "."], cwd=work, check=True)
    else:
        for part in parts:
            zipfile.ZipFile(part).extractall(work / part.stem)
        shutil.make_archive(str(out.with_suffix("")), "zip", work)
    return out


def _timed(run: object) -> float:
    started = time.perf_counter()
    run()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    folder = BENCH / ".work" / f"merge-{args.parts}"
    parts = make_parts(folder, args.parts)
    merged = folder / "merged.zip"
    merge_times, hand_times = [], []
    result: dict[str, object] = {}
    for _ in range(args.rounds):

        def merge() -> None:
            merged.unlink(missing_ok=True)
            done = subprocess.run([XLA_BUGKIT, "merge", "--json", "-o", str(merged),
                                   *map(str, parts)], capture_output=True, text=True,
                                  env=_env())  # fmt: skip
            result.update(json.loads(done.stdout), returncode=done.returncode)

        merge_times.append(_timed(merge))
        hand_times.append(_timed(lambda: by_hand(parts, folder / "by-hand")))
    hand = folder / "by-hand.zip"
    with zipfile.ZipFile(merged) as z:
        manifest = json.loads(z.read("manifest.json"))
        merged_files = len(z.namelist())
    hand_files = len(zipfile.ZipFile(hand).namelist())
    part_files = sum(len(zipfile.ZipFile(p).namelist()) for p in parts)
    part_bytes = sum(p.stat().st_size for p in parts)
    m_time, h_time = statistics.median(merge_times), statistics.median(hand_times)
    rows = [
        ("the parts", part_bytes, part_files, "", ""),
        (
            "by hand: unpack each, zip them together",
            hand.stat().st_size,
            hand_files,
            f"{h_time:.2f}",
            "nothing judged; N ISSUE.md, N verdicts",
        ),
        (
            "`xla-bugkit merge`",
            merged.stat().st_size,
            merged_files,
            f"{m_time:.2f}",
            f"judged by part {manifest['job']['part']} ({manifest['failure']['kind']}), "
            f"`{manifest['modules'][0]['name']}` first, exit {result['returncode']}",
        ),
    ]
    today = _dt.date.today().isoformat()
    lines = [
        "# Merging the parts of a job",
        "",
        f"`python benchmarks/merge_bench.py --parts {args.parts} --rounds {args.rounds}` on "
        f"{today}, {os.cpu_count()} cores: a job of {args.parts} processes "
        "(tests/programs/job_step.py on CPU with gloo, one device each), each under its own "
        f"`collect --job-part I/{args.parts}`; process {FAILING} crashes inside XLA compiling "
        "the step, the others are taken down by the job. Times are the median of the rounds, "
        "merge and by hand interleaved.",
        "",
        "| | bytes | files | seconds | what it says |",
        "|---|---|---|---|---|",
        *(f"| {a} | {b:,} | {c} | {d} | {e} |" for a, b, c, d, e in rows),
        "",
        f"- merge: {', '.join(f'{t:.2f}' for t in merge_times)} s; by hand: "
        f"{', '.join(f'{t:.2f}' for t in hand_times)} s.",
        f"- merge keeps the failing part whole and, of the other {args.parts - 1}, each one's "
        "manifest, log, environment and the modules no kept part has: modules compiled the "
        "same way by several processes are kept once.",
        "",
    ]
    (BENCH / "MERGE.md").write_text("\n".join(lines), "utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
