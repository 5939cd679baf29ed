"""Run the multi-process jax.distributed jobs of this folder under xla-bugkit, as a cluster
would, and write RESULTS.md.

For each program folder (every folder here with an ``expect.json``, or those named on the
command line), all N processes start at once, each under its own collect:

    xla-bugkit collect --timeout 400 --job-part I/N -o WORK/NAME/bundle.zip \
        -- python prog.py I N PORT

(in the program's folder, each one's stdout and stderr to files under WORK/NAME/), which
writes WORK/NAME/bundle.part-I-of-N.zip. Once all have ended:

    xla-bugkit merge -o WORK/NAME/job.zip --json WORK/NAME/bundle.part-*.zip
    xla-bugkit verify --json WORK/NAME/job.zip

and the merged manifest is held to ``expect.json``: the failing part named (``job.part`` in
``failing_parts``), the culprit first (``modules[0].name``), the failure's kind. Where
``merge`` does not exist, the program's row says "merge missing" and the run goes on.

``--bare`` first runs each job's processes without the tool (``timeout 300`` each) and
records what each process printed and how it ended.

    python benchmarks/multihost/run.py [--bare] [--work DIR] [--out FILE] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLLECT_TIMEOUT = "400"
BARE_TIMEOUT = "300"
GUARD_S = 1800  # a part still running after this long is stopped (its session, by its id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tool() -> list[str]:
    beside = Path(sys.executable).with_name("xla-bugkit")
    return [str(beside)] if beside.exists() else ["xla-bugkit"]


def child_env() -> dict[str, str]:
    """`python` on PATH is this interpreter, as in the shell that runs this script."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_all(commands: list[list[str]], cwd: Path, logs: Path, tag: str) -> list[dict]:
    """Start every command at once, output to files; wait for all; exit status and seconds."""
    started = time.monotonic()
    procs = []
    for i, command in enumerate(commands):
        with (
            open(logs / f"{tag}-{i}.out", "wb") as out,
            open(logs / f"{tag}-{i}.err", "wb") as err,
        ):
            procs.append(
                subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=child_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            )
    ended: dict[int, dict] = {}
    while len(ended) < len(procs):
        for i, proc in enumerate(procs):
            if i not in ended and proc.poll() is not None:
                ended[i] = {"exit": proc.returncode, "s": round(time.monotonic() - started)}
        if time.monotonic() - started > GUARD_S:
            for i, proc in enumerate(procs):
                if i not in ended:
                    os.killpg(proc.pid, signal.SIGKILL)  # the session this script started
                    proc.wait()
                    ended[i] = {"exit": "stopped", "s": round(time.monotonic() - started)}
        time.sleep(0.5)
    return [ended[i] for i in range(len(procs))]


def said(path_out: Path, path_err: Path) -> str:
    """The line that says most about how a process ended."""
    text = path_out.read_text("utf-8", "replace") + path_err.read_text("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keys = ("Check failed", "JaxRuntimeError", "FAILED", "Terminating process", "Error")
    for key in keys:
        for line in lines:
            if key in line:
                return line[:160]
    plain = [line for line in lines if not line.startswith(("@", "***", "[Gloo]"))]
    return (plain[-1][:160] + " (last line)") if plain else "(nothing printed)"


def manifest(bundle: Path) -> dict | None:
    if not bundle.is_file():
        return None
    try:
        with zipfile.ZipFile(bundle) as z:
            names = sorted((n for n in z.namelist() if n.endswith("manifest.json")), key=len)
            return json.loads(z.read(names[0])) if names else None
    except (zipfile.BadZipFile, ValueError, KeyError):
        return None


def module_name(module: dict | None) -> str:
    name = str((module or {}).get("name", ""))
    return re.sub(r"^module_\d+\.", "", name)


def culprit_module(culprit: str) -> str:
    match = re.fullmatch(r"jit\((.+)\)", culprit)
    return f"jit_{match.group(1)}" if match else culprit


def summary(m: dict | None) -> dict:
    if m is None:
        return {"kind": None, "first": None, "replay": None}
    modules = m.get("modules") or [None]
    return {
        "kind": (m.get("failure") or {}).get("kind"),
        "first": module_name(modules[0]),
        "replay": ((modules[0] or {}).get("replay") or {}).get("outcome"),
    }


def merge_exists() -> bool:
    done = subprocess.run([*tool(), "merge", "--help"], capture_output=True, text=True, check=False)
    return done.returncode == 0


def bare(folder: Path, expect: dict, work: Path) -> dict:
    n = expect["processes"]
    logs = work / folder.name / "bare"
    logs.mkdir(parents=True, exist_ok=True)
    port = str(free_port())
    commands = [
        ["timeout", BARE_TIMEOUT, "python", "prog.py", str(i), str(n), port] for i in range(n)
    ]
    ends = run_all(commands, folder, logs, "process")
    for i, end in enumerate(ends):
        end["said"] = said(logs / f"process-{i}.out", logs / f"process-{i}.err")
    return {"processes": ends}


def collected(folder: Path, expect: dict, work: Path, have_merge: bool) -> dict:
    n = expect["processes"]
    out = work / folder.name
    if out.exists():
        shutil.rmtree(out / "collect", ignore_errors=True)
        for old in out.glob("*.zip"):
            old.unlink()
    logs = out / "collect"
    logs.mkdir(parents=True, exist_ok=True)
    port = str(free_port())
    commands = [
        [
            *tool(), "collect", "--timeout", COLLECT_TIMEOUT, "--job-part", f"{i}/{n}",
            "-o", str(out / "bundle.zip"), "--", "python", "prog.py", str(i), str(n), port,
        ]
        for i in range(n)
    ]  # fmt: skip
    started = time.monotonic()
    parts = run_all(commands, folder, logs, "part")
    row: dict = {"collect_s": round(time.monotonic() - started), "parts": parts}
    part_files = []
    for i, part in enumerate(parts):
        path = out / f"bundle.part-{i}-of-{n}.zip"
        part["bundle"] = path.is_file()
        part.update(summary(manifest(path)))
        if path.is_file():
            part_files.append(str(path))
    if not have_merge:
        row["merge"] = "merge missing"
        return row
    job = out / "job.zip"
    started = time.monotonic()
    with open(logs / "merge.json", "wb") as so, open(logs / "merge.err", "wb") as se:
        merge_exit = subprocess.run(
            [*tool(), "merge", "-o", str(job), "--json", *part_files],
            stdout=so, stderr=se, env=child_env(), check=False,
        ).returncode  # fmt: skip
    row["merge"] = merge_exit
    row["merge_s"] = round(time.monotonic() - started)
    m = manifest(job)
    row["job"] = summary(m)
    row["job_part"] = ((m or {}).get("job") or {}).get("part")
    if job.is_file():
        started = time.monotonic()
        with open(logs / "verify.json", "wb") as so, open(logs / "verify.err", "wb") as se:
            row["verify"] = subprocess.run(
                [*tool(), "verify", "--json", str(job)],
                stdout=so, stderr=se, env=child_env(), check=False,
            ).returncode  # fmt: skip
        row["verify_s"] = round(time.monotonic() - started)
    return row


def mark(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def status(code: object) -> str:
    """An exit status; a negative one (killed by a signal) by the signal's name."""
    if isinstance(code, int) and code < 0:
        try:
            return f"{signal.Signals(-code).name} ({code})"
        except ValueError:
            return str(code)
    return str(code)


def report(results: dict, work: Path, have_merge: bool | None, command: str) -> str:
    lines = [
        "# Multi-process jax.distributed jobs: what xla-bugkit answered"
        if have_merge is not None
        else "# Multi-process jax.distributed jobs, run bare",
        "",
        f"Written by `benchmarks/multihost/run.py` on "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. Each section is one folder: "
        "a job of N processes on localhost (gloo CPU collectives), each process started on its "
        "own under `xla-bugkit collect --timeout 400 --job-part I/N`, the parts merged with "
        "`xla-bugkit merge` and the merged bundle checked with `xla-bugkit verify`. The "
        "expected answer is the folder's `expect.json`; its `prog.py` docstring says what "
        "XLA does wrong. The programs were written without reading the tool's code.",
        "",
    ]
    if have_merge is False:
        lines += ["`xla-bugkit merge` did not exist when this ran: no job was merged.", ""]
    for name, r in results.items():
        e = r["expect"]
        lines += [
            f"## {name}",
            "",
            f"{e['processes']} processes x {e['devices_per_process']} devices; expected: "
            f"{e['kind']} in {e['culprit']}, failing part(s) {e['failing_parts']}"
            f"{' (every part)' if e['all_fail'] else ''}.",
            "",
        ]
        if "bare" in r:
            lines += ["Bare (no tool), each process under `timeout 300`:", ""]
            lines += ["| process | exit | s | what it said |", "| --- | --- | --- | --- |"]
            for i, p in enumerate(r["bare"]["processes"]):
                text = p["said"].replace("|", "\\|")
                lines.append(f"| {i} | {status(p['exit'])} | {p['s']} | {text} |")
            lines.append("")
        c = r.get("collect")
        if c is None:
            continue
        lines += ["Each part under collect:", ""]
        lines += [
            "| part | collect exit | s | bundle | its failure kind | its first module | replay |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for i, p in enumerate(c["parts"]):
            lines.append(
                f"| {i} | {status(p['exit'])} | {p['s']} | {'yes' if p['bundle'] else 'no'} | "
                f"{p['kind']} | {p['first']} | {p['replay']} |"
            )
        lines.append("")
        if c["merge"] == "merge missing":
            lines += [f"Merge: merge missing. Collect phase {c['collect_s']} s.", ""]
            continue
        job = c.get("job") or {}
        part_ok = c.get("job_part") in e["failing_parts"]
        first_ok = job.get("first") == culprit_module(e["culprit"])
        kind_ok = job.get("kind") == e["kind"]
        lines += [
            "| check | expected | merged bundle | |",
            "| --- | --- | --- | --- |",
            f"| failing part named | one of {e['failing_parts']} | {c.get('job_part')} | "
            f"{mark(part_ok)} |",
            f"| culprit first | {culprit_module(e['culprit'])} | {job.get('first')} | "
            f"{mark(first_ok)} |",
            f"| kind | {e['kind']} | {job.get('kind')} | {mark(kind_ok)} |",
            f"| first module's replay | reproduced | {job.get('replay')} | "
            f"{mark(str(job.get('replay', '')).startswith('reproduced'))} |",
            f"| merge exit | 0 | {c['merge']} | {mark(c['merge'] == 0)} |",
            f"| verify exit | 0 | {c.get('verify', 'not run')} | {mark(c.get('verify') == 0)} |",
            "",
            f"Seconds: collect (all parts) {c['collect_s']}, merge {c.get('merge_s')}, "
            f"verify {c.get('verify_s')}.",
            "",
        ]
    lines += [
        "Run with:",
        "",
        "    " + command,
        "",
        f"Logs and bundles of this run were under a scratch folder ({work.name}).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="program folders to run (default: all)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temp dir)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--bare", action="store_true", help="run each job bare first")
    parser.add_argument("--bare-only", action="store_true", help="only the bare runs")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="multihost-"))
    work.mkdir(parents=True, exist_ok=True)
    names = args.names or sorted(p.parent.name for p in HERE.glob("*/expect.json"))
    have_merge = None if args.bare_only else merge_exists()
    if have_merge is False:
        print("xla-bugkit merge is missing: the parts are collected, not merged", flush=True)
    results: dict = {}
    for name in names:
        folder = HERE / name
        expect = json.loads((folder / "expect.json").read_text("utf-8"))
        results[name] = {"expect": expect}
        if args.bare or args.bare_only:
            print(f"{name}: bare, {expect['processes']} processes", flush=True)
            results[name]["bare"] = bare(folder, expect, work)
        if not args.bare_only:
            print(f"{name}: collect, {expect['processes']} parts", flush=True)
            results[name]["collect"] = collected(folder, expect, work, bool(have_merge))
        (work / "results.json").write_text(json.dumps(results, indent=1), "utf-8")
    flags = ["--bare"] * args.bare + ["--bare-only"] * args.bare_only + args.names
    command = " ".join(["python benchmarks/multihost/run.py", *flags])
    args.out.write_text(report(results, work, have_merge, command), "utf-8")
    print(f"wrote {args.out}; logs under {work}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
