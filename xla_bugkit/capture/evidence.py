"""What each Python process of a run recorded about itself, read back after the run.

The start-up hook (``capture/hook``) writes, for every Python process of the rerun, one file
``<work>/processes/<pid>.jsonl``: one JSON object per line, each line written with a single
``write`` on an ``O_APPEND`` descriptor, so a crash loses at most the line being written and
processes never interleave. A fatal signal or Ctrl-C adds ``<pid>.stack.txt`` (faulthandler).

Records (key ``e``; every record also has ``t``, seconds since the epoch):

``start``      ``pid``, ``ppid``, ``argv``, ``cwd``, ``rlimits`` ({"RLIMIT_AS": [soft, hard]})
``backend``    the moment XLA's backend started in this process: ``platform``, ``rank``,
               ``processes``, ``devices``, ``env`` (``XLA_FLAGS``, ``LIBTPU_INIT_ARGS`` as in
               force then, empty values kept), ``jax_config`` (name -> repr), ``dump_dir``
``compile``    a compilation started: ``n`` (sequence number in this process), ``fun``
               (``jit(f)``), ``module`` (``jit_f``), ``id`` (the dump's module number, null when
               not known yet), ``shapes`` (argument shapes as text)
``compiled``   that compilation ended: ``n``, ``id`` (known now)
``execute``    an execution started: ``n``, ``module``, ``id``
``executed``   that execution ended: ``n``
``args``       the arguments of execution ``n`` were saved: ``n``, ``file`` (relative to
               ``processes/``), ``bytes``
``rlimit``     the program changed a limit: ``name``, ``soft``, ``hard``
``exit``       the interpreter is exiting normally: ``status`` when known

Unknown records and keys are ignored, so the hook can grow without breaking readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROCESSES = "processes"  # the folder under the work dir


@dataclass(frozen=True)
class Event:
    """One compilation or execution, from its start record (and its end, if it ended)."""

    kind: str  # "compile" or "execute"
    n: int
    module: str
    id: int | None
    fun: str = ""
    shapes: str = ""
    started: float = 0.0
    ended: float | None = None  # None: still running when the process died or was stopped
    args: Path | None = None  # saved arguments (executions only)

    @property
    def finished(self) -> bool:
        return self.ended is not None


@dataclass(frozen=True)
class ProcessEvidence:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    events: tuple[Event, ...]  # in start order
    rank: int | None = None
    processes: int | None = None
    devices: int | None = None
    platform: str = ""
    env: dict[str, str] = field(default_factory=dict)  # flags in force at backend start
    jax_config: dict[str, str] = field(default_factory=dict)
    dump_dir: Path | None = None
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)  # the last value seen
    stack: str | None = None  # faulthandler's Python stack at a fatal signal or Ctrl-C
    exited: bool = False  # the interpreter reached a normal exit

    @property
    def unfinished(self) -> Event | None:
        """The compilation or execution under way when the process stopped."""
        return next((e for e in reversed(self.events) if not e.finished), None)

    @property
    def started_backend(self) -> bool:
        return bool(self.platform)


def load(work: Path) -> tuple[ProcessEvidence, ...]:
    """Every process that recorded evidence under ``work``, oldest first. Damaged lines (the
    one being written at a crash) are skipped."""
    folder = work / PROCESSES
    if not folder.is_dir():
        return ()
    found = [_load_one(path) for path in folder.glob("*.jsonl")]
    return tuple(sorted((p for p in found if p is not None), key=lambda p: p.pid_order))


def _records(path: Path) -> Iterable[dict[str, Any]]:
    with path.open("rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("e"), str):
                yield record


def _load_one(path: Path) -> _Loaded | None:
    start: dict[str, Any] = {}
    backend: dict[str, Any] = {}
    events: dict[tuple[str, int], dict[str, Any]] = {}
    rlimits: dict[str, tuple[int, int]] = {}
    exited = False
    for r in _records(path):
        kind = r["e"]
        if kind == "start":
            start = r
            rlimits.update(_limits(r.get("rlimits")))
        elif kind == "backend":
            backend = r
        elif kind in ("compile", "execute") and isinstance(r.get("n"), int):
            events[(kind, r["n"])] = dict(r)
        elif kind in ("compiled", "executed") and isinstance(r.get("n"), int):
            begun = events.get(({"compiled": "compile", "executed": "execute"}[kind], r["n"]))
            if begun is not None:
                begun["ended"] = r.get("t", 0.0)
                if isinstance(r.get("id"), int):
                    begun["id"] = r["id"]
        elif kind == "args" and isinstance(r.get("n"), int) and isinstance(r.get("file"), str):
            begun = events.get(("execute", r["n"]))
            if begun is not None:
                begun["args"] = path.parent / r["file"]
        elif kind == "rlimit" and isinstance(r.get("name"), str):
            rlimits.update(_limits({r["name"]: [r.get("soft"), r.get("hard")]}))
        elif kind == "exit":
            exited = True
    if not isinstance(start.get("pid"), int):
        return None
    stack_file = path.with_name(f"{start['pid']}.stack.txt")
    stack = stack_file.read_text(errors="replace") if stack_file.is_file() else None
    ordered = sorted(events.values(), key=lambda r: (r.get("t", 0.0), r["n"]))
    return _Loaded(
        pid=start["pid"],
        ppid=_int(start.get("ppid")) or 0,
        argv=tuple(str(a) for a in start.get("argv", ()) if isinstance(a, str)),
        events=tuple(_event(r) for r in ordered),
        rank=_int(backend.get("rank")),
        processes=_int(backend.get("processes")),
        devices=_int(backend.get("devices")),
        platform=str(backend.get("platform") or ""),
        env=_strings(backend.get("env")),
        jax_config=_strings(backend.get("jax_config")),
        dump_dir=Path(backend["dump_dir"]) if isinstance(backend.get("dump_dir"), str) else None,
        rlimits=rlimits,
        stack=stack or None,
        exited=exited,
        pid_order=float(start.get("t", 0.0)),
    )


@dataclass(frozen=True)
class _Loaded(ProcessEvidence):
    pid_order: float = 0.0  # start time: parents before the children they started


def _event(r: dict[str, Any]) -> Event:
    return Event(
        kind=r["e"],
        n=r["n"],
        module=str(r.get("module") or ""),
        id=_int(r.get("id")),
        fun=str(r.get("fun") or ""),
        shapes=str(r.get("shapes") or ""),
        started=float(r.get("t", 0.0)),
        ended=float(r["ended"]) if isinstance(r.get("ended"), (int, float)) else None,
        args=r.get("args") if isinstance(r.get("args"), Path) else None,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, (str, int, float, bool))}


def _limits(value: object) -> dict[str, tuple[int, int]]:
    if not isinstance(value, dict):
        return {}
    out = {}
    for name, pair in value.items():
        if (
            isinstance(pair, (list, tuple))
            and len(pair) == 2
            and all(_int(v) is not None for v in pair)
        ):
            out[str(name)] = (int(pair[0]), int(pair[1]))
    return out
