"""Collect each program of tests/programs/shapes with xla-bugkit and check what it says.

    python benchmarks/shapes.py [--only NAME]... [--work DIR] [--out FILE] [--bare] [--root DIR]

Every folder of tests/programs/shapes is a user's program of one shape (a pytest file, a
package run with -m, a launcher of ranks, spawned workers, ...) that fails inside XLA for
real on jax/jaxlib 0.10.2 CPU. Its expect.json says how it is run and what a correct tool
must answer: the failure kind, the jitted function that is the culprit (its module name), and
the replay outcome that proves it. For each folder, one after another, this runs

    xla-bugkit collect -o WORK/NAME/bundle.zip --workdir WORK/NAME/workdir -- COMMAND...

in that folder, reads manifest.json from the bundle, and prints one row: the culprit
expected, the module collect chose first, how its replay ended, the failure kind and exit
status, then PASS/FAIL for "culprit first" (the first chosen module is the culprit),
"verdict class" (collect exit 0, the expected failure kind, and a first replay that
reproduced it the expected way) and "output" (the program's own lines came through as the
program prints them, and for a program that logs, no log line was added). The table goes to
benchmarks/SHAPES.md too, with what collect said for each FAIL.

`python` in a command is the interpreter running this script (its folder goes first on
PATH), and XLA_FLAGS is taken out of the environment: the programs set the flags they need.
`--root DIR` takes the folders from DIR instead (a set of held-out shapes). `--bare` first
runs each command without the tool and checks its exit status against expect.json's
`bare_exit`. An optional `collect_args` list in expect.json goes to collect
before `--` (a hang's `--timeout 90`); a `--timeout` there stops the bare run too. Stdlib
only. Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHAPES = REPO / "tests" / "programs" / "shapes"
TIMEOUT = 1200.0  # seconds for one collect: each program runs in about a minute or less


@dataclass(frozen=True)
class Expect:
    """A shape's expect.json: how to run it and the answer a correct tool gives."""

    name: str
    folder: Path
    shape: str
    command: list[str]
    bare_exit: int
    kind: str  # the manifest's failure kind
    culprit: str  # the jitted function, as jax names it
    module: str  # its XLA module name
    replay: str  # the first module's replay outcome
    prints: list[str]  # the starts of lines the program prints
    log_lines: dict[str, Any] | None  # {"match": regex, "expected": [the exact lines]}
    collect_args: list[str] = field(default_factory=list)  # collect's options, e.g. --timeout
    xla_bug: bool = True  # false: the right answer is "does not look like an XLA bug" (exit 3)
    dump_folder: str | None = None  # the program's own --xla_dump_to: collect writes none there

    @property
    def timeout(self) -> float:
        """How long the program may run: a hang's own `--timeout`, else TIMEOUT."""
        args = self.collect_args
        return float(args[args.index("--timeout") + 1]) if "--timeout" in args else TIMEOUT

    @classmethod
    def load(cls, folder: Path) -> Expect:
        data = json.loads((folder / "expect.json").read_text())
        return cls(name=folder.name, folder=folder, **data)


@dataclass(frozen=True)
class Collected:
    exit_code: int
    stdout: str
    stderr: str
    manifest: dict[str, Any] | None
    seconds: float
    written_to_dump_folder: int = 0  # files collect's run left in the program's dump folder

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines() + self.stderr.splitlines()


@dataclass(frozen=True)
class Row:
    name: str
    expected: str
    chosen: str
    replay: str
    verdict: str
    title: str  # the bundle's issue title: collect's headline
    culprit_first: bool
    verdict_class: bool
    output: bool
    seconds: float
    said: list[str]  # what collect said, quoted for a FAIL

    @property
    def passed(self) -> bool:
        return self.culprit_first and self.verdict_class and self.output


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run(
    command: list[str], cwd: Path, log: Path, timeout: float = TIMEOUT
) -> tuple[int, str, str, float]:
    """Run to the end (or timeout), keeping stdout and stderr apart; SIGTERM, then SIGKILL."""
    started = time.monotonic()
    child = subprocess.Popen(
        command,
        cwd=cwd,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGTERM)  # collect stops the program and its replays
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
    seconds = time.monotonic() - started
    log.write_text(f"$ {' '.join(command)}\n--- stdout\n{out}--- stderr\n{err}")
    return child.returncode, out, err, seconds


def collect(expect: Expect, work: Path) -> Collected:
    work.mkdir(parents=True, exist_ok=True)
    bundle = work / "bundle.zip"
    bundle.unlink(missing_ok=True)
    command = [
        str(Path(sys.executable).with_name("xla-bugkit")),
        "collect",
        "-o", str(bundle),
        "--workdir", str(work / "workdir"),
        *expect.collect_args,
        "--", *expect.command,
    ]  # fmt: skip
    started = time.time()
    code, out, err, seconds = run(command, expect.folder, work / "collect.log")
    manifest = None
    if bundle.exists():
        with zipfile.ZipFile(bundle) as archive:
            manifest = json.loads(archive.read("manifest.json"))
    written = 0
    if expect.dump_folder is not None:
        folder = expect.folder / expect.dump_folder
        written = sum(f.is_file() and f.stat().st_mtime >= started for f in folder.rglob("*"))
    return Collected(code, out, err, manifest, seconds, written)


def output_kept(expect: Expect, lines: list[str]) -> bool:
    """The program's own lines came through, and (for a program that logs) no log line was added."""
    if not all(any(line.startswith(want) for line in lines) for want in expect.prints):
        return False
    if expect.log_lines is None:
        return True
    pattern = re.compile(expect.log_lines["match"])
    expected: list[str] = expect.log_lines["expected"]
    return [line for line in lines if pattern.match(line)] == expected


def what_collect_said(stderr: str) -> list[str]:
    """collect's summary: from its last `xla-bugkit:` line up to the bundle line."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("xla-bugkit: ")]
    said = []
    for line in lines[starts[-1] :] if starts else lines[-8:]:
        if line.startswith(("  bundle:", "  next:")):
            break
        said.append(line if len(line) <= 240 else line[:239] + "…")
    return said[:12]


def judge(expect: Expect, got: Collected) -> Row:
    manifest = got.manifest or {}
    modules = manifest.get("modules") or [{}]
    first = modules[0]
    replay = (first.get("replay") or {}).get("outcome", "none")
    kind = (manifest.get("failure") or {}).get("kind", "no bundle")
    culprit_first = first.get("name") == expect.module
    if expect.xla_bug:
        verdict_class = got.exit_code == 0 and kind == expect.kind and replay == expect.replay
    else:  # the program's own fault: said so, with no issue link
        said = " ".join(got.stderr.split())
        verdict_class = got.exit_code == 3 and "this does not look like an XLA bug" in said
    output = output_kept(expect, got.lines) and got.written_to_dump_folder == 0
    passed = culprit_first and verdict_class and output
    return Row(
        name=expect.name,
        expected=f"{expect.culprit} ({expect.kind})",
        chosen=first.get("label", "none"),
        replay=replay,
        verdict=f"{kind}; exit {got.exit_code}",
        title=manifest.get("title", "no bundle"),
        culprit_first=culprit_first,
        verdict_class=verdict_class,
        output=output,
        seconds=got.seconds,
        said=[] if passed else what_collect_said(got.stderr),
    )


def mark(ok: bool) -> str:
    return "PASS" if ok else "**FAIL**"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| shape | expected culprit (kind) | collect chose first | its replay | failure kind; "
        "collect exit | culprit first | verdict class | output | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.expected} | {r.chosen} | {r.replay} | {r.verdict} | "
            f"{mark(r.culprit_first)} | {mark(r.verdict_class)} | {mark(r.output)} | "
            f"{r.seconds:.0f} |"
        )
    return lines


def versions() -> str:
    try:
        return f"jax {metadata.version('jax')}, jaxlib {metadata.version('jaxlib')}"
    except metadata.PackageNotFoundError:
        return "jax not installed here"


def report(
    rows: list[Row], expects: dict[str, Expect], started: datetime, root: Path = SHAPES
) -> str:
    passed = sum(r.passed for r in rows)
    lines = [
        "# xla-bugkit on programs of many shapes",
        "",
        f"Written by `benchmarks/shapes.py` on {started:%Y-%m-%d %H:%M} UTC, {versions()} on CPU."
        f" Each row is one folder of `{_shown(root)}/`: a real program that fails "
        "inside XLA, run with `xla-bugkit collect -o bundle.zip --workdir DIR -- COMMAND` in "
        "that folder. The expected answer is the folder's `expect.json`; the program's "
        "docstring says what XLA does wrong.",
        "",
        "- **culprit first**: the first module in the bundle's manifest is the culprit's.",
        "- **verdict class**: collect exited 0, the manifest's failure kind is the expected one, "
        "and the first module's replay reproduced it the expected way; for a program at fault "
        "itself (`xla_bug: false`), collect exited 3 saying it does not look like an XLA bug.",
        "- **output**: the program's own lines came through as it prints them; for a program "
        "that logs, its log lines are exactly those of a run without the tool; for a program "
        "with a dump folder of its own (`dump_folder`), collect wrote nothing into it.",
        "",
        f"{passed} of {len(rows)} shapes pass every check.",
        "",
        *table(rows),
        "",
        "## Shapes, and the title collect gave each bundle",
        "",
    ]
    for r in rows:
        expect = expects[r.name]
        command = " ".join(expect.command)
        options = f"; collect `{' '.join(expect.collect_args)}`" if expect.collect_args else ""
        lines.append(f"- `{r.name}` (`{command}`{options}): {expect.shape}. Title: {r.title}")
    failed = [r for r in rows if not r.passed]
    if failed:
        lines += ["", "## What collect said where a check failed", ""]
        for r in failed:
            lines += [f"`{r.name}`:", "", "```text", *r.said, "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def _shown(root: Path) -> str:
    try:
        return root.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(root)


def write(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def check_bare(expect: Expect, work: Path) -> bool:
    work.mkdir(parents=True, exist_ok=True)
    code, _, _, seconds = run(expect.command, expect.folder, work / "bare.log", expect.timeout)
    ok = code == expect.bare_exit
    verdict = "as expected" if ok else f"expected {expect.bare_exit}"
    print(f"bare {expect.name}: exit {code} in {seconds:.0f} s ({verdict})", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="run only this shape (repeatable)")
    parser.add_argument("--work", type=Path, default=BENCH / ".work" / "shapes")
    parser.add_argument("--out", type=Path, default=BENCH / "SHAPES.md")
    parser.add_argument("--bare", action="store_true", help="also run each program bare first")
    parser.add_argument("--root", type=Path, default=SHAPES, help="the folder of shape folders")
    opts = parser.parse_args(argv)

    folders = sorted(p.parent for p in opts.root.glob("*/expect.json"))
    expects = {f.name: Expect.load(f) for f in folders if not opts.only or f.name in opts.only}
    started = datetime.now(UTC)
    rows, bare_ok = [], True
    for name, expect in expects.items():
        if opts.bare:
            bare_ok &= check_bare(expect, opts.work / name)
        print(f"collect {name}: {' '.join(expect.command)}", flush=True)
        row = judge(expect, collect(expect, opts.work / name))
        print("\n".join(table([row])[2:]), flush=True)
        rows.append(row)

    text = report(rows, expects, started, opts.root)
    write(opts.out, text)
    print("\n" + text)
    return 0 if bare_ok and all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
