"""collect's work dir: the run's dumps, its output and its record, kept on disk so that a
bundle can be made from them again (``xla-bugkit bundle WORKDIR``) without rerunning a
program that may have taken hours.

Layout::

    WORKDIR/
      dump/      XLA's dumps (--xla_dump_to); a second process with a backend (another rank,
                 a worker) dumps into dump/<pid>/
      processes/ what each Python process of the run recorded (``capture.evidence``)
      run.log    the program's output, as it arrived
      run.json   how the run ended (``RunRecord`` without the output)
      bundle/    the bundle's staging folder, while one is written
      interpret/ the program's run under Pallas's TPU interpret mode, for a kernel's
                 reference (its own dump/, processes/, run.log and interpreted.npz)
      .xla-bugkit-owner  the collect that made it, while it runs (``leftovers``): should
                 it be killed, the next collect removes the folder
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import flags
from xla_bugkit.proc import leftovers
from xla_bugkit.run.record import RunRecord

DUMP, LOG, RECORD, STAGE = "dump", "run.log", "run.json", "bundle"
PROCESSES = "processes"  # what each process recorded (``capture.evidence``)
# Redacted copies made while the program tore itself down, for staging to link (``filememo``).
REDACTED = "redacted"
# The replays the program's own process made at its main module's end (``ahead``).
AHEAD = "ahead"
# The program's run under Pallas's interpret mode, for a kernel's reference (``interpret``).
INTERPRET = "interpret"
NAMES = (DUMP, LOG, RECORD, STAGE, PROCESSES, REDACTED, AHEAD, INTERPRET)
RECORD_SCHEMA = 1


def runs_folder() -> Path:
    """Where collect makes its work dirs by default: under the user cache dir."""
    return Path(platformdirs.user_cache_dir("xla-bugkit")) / "runs"


def default_workdir(*, owned: bool = False) -> Path:
    """A fresh folder under ``runs_folder``, named by the time it was made; ``owned``: marked
    as this process's (``leftovers``), for the next collect to remove should it be killed."""
    base = runs_folder()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=base))
    if owned:
        leftovers.mark(work)
    return work


def prepare(given: Path | None, *, owned: bool = False) -> Path:
    """The work dir for a new run: ``given`` (which must not hold a run already), else a
    fresh one under the user cache dir, ``owned`` as ``default_workdir``'s. A folder the user
    gave is never marked: no later collect may remove it. The work dir is absolute."""
    if given is None:
        return default_workdir(owned=owned)
    # Absolute: the dump flags name it, and the program may change its own directory.
    given = given.absolute()
    if any((given / name).exists() for name in NAMES):
        raise BugkitError(f"{given} already holds a collect run: give an empty or new --workdir")
    given.mkdir(parents=True, exist_ok=True)
    return given


def clear(work: Path) -> None:
    """Empty ``work`` of a run, for the program to run again in it."""
    for name in NAMES:
        path = work / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def killed_runs() -> list[leftovers.Leftover]:
    """The work dirs under ``runs_folder`` whose collect was killed; a deletion under way
    (``REMOVING``, which outlives its collect) is not one of them."""
    return leftovers.killed_folders(runs_folder(), "[!.]*")


def remove(work: Path, *, made_here: bool, detach: bool = False) -> None:
    """Remove a run's work dir; a folder the user gave loses only what the run put there.

    ``detach``: what goes is first moved aside under a ``.removing-`` name (renames, at
    once) and a process of its own deletes it, so the caller does not wait for a large
    dump's deletion (a training run's snapshots take seconds); where that cannot be done, it
    is deleted here as without ``detach``.
    """
    if detach:
        aside = _moved_aside(work, made_here=made_here)
        # A deletion a reboot cut short is finished along with this one.
        stale = _left_aside(work.parent) if made_here else []
        if aside is not None and not _delete_detached([aside, *stale]):
            shutil.rmtree(aside, ignore_errors=True)
    # What was not moved aside (all of it, without ``detach``) goes now.
    if made_here:
        shutil.rmtree(work, ignore_errors=True)
        return
    for name in NAMES:
        _delete(work / name)


REMOVING = ".removing-"  # what a detached deletion has yet to delete
# The deleting process: as small as Python starts (no site, no user paths), started in the
# background by a shell that exits at once; so the caller waits for no Python to start, and
# no process of its must wait on the deletion or reap it.
_DELETE = """\
import shutil, sys
for path in sys.argv[1:]:
    shutil.rmtree(path, ignore_errors=True)
"""
_IN_BACKGROUND = ["/bin/sh", "-c", '"$@" &', "sh"]  # sh's "$@": the command after "sh"


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _moved_aside(work: Path, *, made_here: bool) -> Path | None:
    """The folder the work dir's run was renamed to (what could not be moved stays where it
    was); None when there is none."""
    try:
        if made_here:
            aside = work.with_name(REMOVING + work.name)
            work.rename(aside)
            return aside
        aside = Path(tempfile.mkdtemp(prefix=REMOVING, dir=work))
    except OSError:
        return None
    for name in NAMES:
        with contextlib.suppress(OSError):
            if (work / name).exists() or (work / name).is_symlink():
                (work / name).rename(aside / name)
    return aside


def _left_aside(folder: Path) -> list[Path]:
    """What a detached deletion under ``folder`` left there a day ago or more."""
    day_ago = time.time() - 86400
    try:
        return [p for p in folder.glob(REMOVING + "*") if p.lstat().st_mtime < day_ago]
    except OSError:
        return []


def _delete_detached(paths: list[Path]) -> bool:
    """Start the deletion of ``paths`` in a process of its own; whether it started (the
    shell does not wait to tell: an interpreter that cannot run is checked here)."""
    if not sys.executable or not os.access(sys.executable, os.X_OK):
        return False
    try:
        done = subprocess.run(
            [*_IN_BACKGROUND, sys.executable, "-I", "-S", "-c", _DELETE, *map(str, paths)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal is not for it
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def save_run(work: Path, run: RunRecord) -> None:
    """Write ``run.json``: everything of ``run`` but its output, which ``run.log`` holds."""
    record = {
        "schema": RECORD_SCHEMA,
        "command": list(run.command),
        "exit_status": run.exit_status,
        "timed_out": run.timed_out,
        "interrupted": run.interrupted,
        "duration": run.duration,
        "xla_flags": {
            "flags": list(run.xla_flags.flags),
            "user_flags": list(run.xla_flags.user_flags),
            "notes": list(run.xla_flags.notes),
        },
        "failure": run.failure.to_json(),
        "hidden": run.hidden,
        "job": dict(run.job) if run.job is not None else None,
        "tpu_args": list(run.tpu_args),
    }
    (work / RECORD).write_text(json.dumps(record, indent=2) + "\n", "utf-8")


def load_run(work: Path) -> RunRecord:
    """The run a work dir holds, as ``collect`` recorded it; one clear error if it holds none."""
    if not work.is_dir():
        what = "is not a folder" if work.exists() else "does not exist"
        raise BugkitError(f"{work} {what}: give the work dir collect kept")
    record_path, log_path = work / RECORD, work / LOG
    if not record_path.is_file():
        raise BugkitError(
            f"{work} has no {RECORD}: give a work dir that collect kept "
            "(--keep-workdir, or the one it named when the bundle could not be written)"
        )
    try:
        return _from_json(json.loads(record_path.read_text("utf-8")), log_path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        why = f"no {e}" if isinstance(e, KeyError) else str(e)
        raise BugkitError(
            f"{record_path} is not a run record xla-bugkit can read ({why})"
        ) from None


def _from_json(data: Any, log_path: Path) -> RunRecord:
    from xla_bugkit.failure.classify import Failure  # read after a run, never before one

    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != RECORD_SCHEMA:
        raise ValueError(f"schema {schema!r}; this xla-bugkit reads schema {RECORD_SCHEMA}")
    merged = data["xla_flags"]
    try:
        output = log_path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise ValueError(f"its {LOG} is missing") from None
    exit_status = data["exit_status"]
    if exit_status is not None and not isinstance(exit_status, int):
        raise TypeError("exit_status is not a number")
    return RunRecord(
        command=tuple(_strings(data["command"])),
        exit_status=exit_status,
        timed_out=bool(data["timed_out"]),
        interrupted=bool(data["interrupted"]),
        duration=float(data["duration"]),
        log=log_path,
        output=output,
        xla_flags=flags.MergedFlags(
            tuple(_strings(merged["flags"])),
            tuple(_strings(merged["user_flags"])),
            tuple(_strings(merged["notes"])),
        ),
        failure=Failure.from_json(data["failure"]),
        hidden=_optional_string(data.get("hidden")),
        job=data["job"] if isinstance(data.get("job"), dict) else None,
        tpu_args=tuple(_strings(data.get("tpu_args", []))),
    )


def _optional_string(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _strings(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("expected a list of strings")
    return value


def replaced_dump_dir(run: RunRecord) -> str | None:
    """The user's own ``--xla_dump_to`` folder, when collect dumped elsewhere for the run:
    set before collect started, or by the program itself (the hook's record)."""
    for flag in run.xla_flags.user_flags:
        if flags.name_of(flag) == "--xla_dump_to":
            return flags.value_of(flag) or ""
    if run.culprit is not None:
        for p in (run.culprit.process, *run.culprit.others):
            if p.user_dump_dir is not None:
                return p.user_dump_dir
    return None
