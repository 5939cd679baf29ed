"""The files the start-up hook writes, one per Python process of a run, read back after the
run: each into what that process recorded about itself (``evidence.ProcessEvidence``).

The start-up hook (``capture/hook``) writes, for every Python process of the rerun, one file
``<work>/processes/<pid>.jsonl``: one JSON object per line, each line written with a single
``write`` on an ``O_APPEND`` descriptor, so a crash loses at most the line being written and
processes never interleave. A fatal signal or Ctrl-C adds ``<pid>.stack.txt`` (faulthandler).

Records (key ``e``; every record also has ``t``, seconds since the epoch):

``start``      ``pid``, ``ppid``, ``argv``, ``cwd``, ``rlimits`` ({"RLIMIT_AS": [soft, hard]})
``backend``    the moment XLA's backend started in this process: ``platform``, ``rank``,
               ``processes``, ``devices``, ``env`` (``XLA_FLAGS``, ``LIBTPU_INIT_ARGS`` as in
               force then, empty values kept), ``jax_config`` (name -> repr), ``dump_dir``,
               ``local_devices``, ``device_kind``, ``device_list`` (at most 64),
               ``platform_version``, ``versions`` (this interpreter's: ``python``,
               ``python_executable``, ``jax``, ``jaxlib``, ``numpy``, ... as imported).
               One per platform started; the first holds the flags XLA read.
``compile``    a compilation started: ``n`` (sequence number in this process), ``fun``
               (``jit(f)``), ``module`` (``jit_f``), ``id`` (the dump's module number, null when
               not known yet), ``shapes`` (argument shapes as text), ``dump_to`` (only when the
               program's compile options sent this module's dumps elsewhere), ``options``
               (the XLA options the program passed to this compile, as flags; only when any)
``compiled``   that compilation ended: ``n``, ``id`` (when known), ``error`` (when it raised)
``execute``    an execution started: ``n``, ``module``, ``id`` or ``c`` (the ``n`` of its
               compilation); ``fed`` (the ``n`` of each earlier execution whose outputs it
               takes, when any: ``hook.outputs``); ``seen``, for one the hook found under
               way only when collect asked before the stop (``hook.waiting``): what showed it
``executed``   its dispatch returned: ``n``, ``error`` (when it raised), ``pending`` (the device
               was still computing its outputs: a ``ready`` record follows when they are)
``args``       the arguments of execution ``n`` were saved: ``n``, ``file`` (relative to
               ``processes/``; an ``.npz`` of ``arr_0``, ``arr_1``, ... in parameter order),
               ``bytes``. Only multi-device executions, which XLA writes no snapshot of, and
               only the newest within a size budget (older files are deleted)
``shards``     this process's shards of execution ``n``, a call over the devices of several
               processes (a ``jax.distributed`` job), were saved: ``n``, ``file``
               (``<pid>.shards-<n>.npz``: one array per distinct shard, then ``layout``,
               where each goes in its global array: ``hook.shards``), ``bytes``, ``call``
               (the how-manieth execution of its module in this process, 1 for the first);
               within the same budget as ``args``. Every call of such a module is saved;
               each module keeps its first call's file and its newest call's, and the
               file of a record in between is gone
``inputs``     the inputs of another framework's call were saved (TensorFlow's
               ``jit_compile`` functions, which write no snapshot): ``n``, ``file`` (as for
               ``args``, in the module's parameter order as far as the hook knows it),
               ``bytes``, ``fun`` (the concrete function, ``__inference_f_46``),
               ``framework``. The recorder starts on ``import tensorflow`` too; such a
               process records no ``backend``
``outputs``    the outputs of execution ``n`` were saved (``file``, ``bytes``, as for ``args``,
               with the outputs' dtype names as the last array, ml_dtypes' as raw bits):
               only in the run collect starts for a Pallas kernel's reference, the first
               call of the module it names
``pallas_interpret`` Pallas's TPU interpret mode was forced on the process (``hook``
               ``pallas_interpret``): ``module``, whose outputs it keeps; or ``error``, why
               it could not be (no Pallas, no interpret mode in this jax)
``args_skipped`` execution ``n``'s arguments were over the budget: ``n`` (or ``fun``),
               ``bytes``
``rlimit``     the program changed a limit: ``name``, ``soft``, ``hard``
``state``      the process's answer to collect's question before a stop (``ask``), after
               the ``execute`` records of the calls it found under way: ``unready`` (the
               MLIR types of arrays still being computed, at most 64), ``unready_count``,
               ``calls`` (how many it recorded); or ``error``
``flags_kept`` collect's XLA flags were put back into XLA_FLAGS before XLA read them:
               ``program`` (the value the program had set, which now follows them)
``dump_to_replaced`` the program set a ``--xla_dump_to`` of its own, taken out of XLA_FLAGS so
               that XLA dumps where collect reads: ``folder`` (absolute)
``cache_defeated`` a cache the program would have read and written was not (``hook.caches``):
               ``cache`` "jax" and its ``folder`` (absolute), the persistent compilation
               cache the program turned on; or "xla" and the ``flag`` taken out of XLA_FLAGS
``ready``      the outputs of execution ``n``, whose ``executed`` record said ``pending`` (the
               device was still computing as dispatch returned), are computed; ``error`` when
               computing them raised (the call's error, met when the program read them).
               Also written, with ``error``, when a later call took outputs of ``n`` that
               held its error (``hook.outputs``), and where the program's own wait on them
               (``block_until_ready``, a read to the host) raised it (``hook.ready``)
``exit``       the interpreter is exiting normally: ``status`` when known, and ``how``:
               "exception" (an uncaught one: status 1), "sys.exit" (the status it asked for)
               or "SystemExit" (one raised with a message, which Python printed: status 1)
``exiting``    the program's main thread called sys.exit: the ``status`` it asked for, written
               at the call (its ``exit`` record may never come: a job's coordination
               service can abort the process at the shutdown barrier its exit waits at)
``uncaught``   an exception Python printed and went on from, which the exit status never
               shows: ``where`` ("thread 'evaluator'", "an atexit function"), ``type``
               (``jax.errors.JaxRuntimeError``), ``error`` (its type's name and first line)
``versions``   jax, TensorFlow or torch_xla was imported: ``versions``, as a ``backend`` record
               has them (the interpreter's ``python``, ``python_executable``, and each of
               ``jax``, ``jaxlib``, ``numpy``, ``ml_dtypes``, ``tensorflow``, ``torch``,
               ``torch_xla`` imported by then): the only record of them in a process that
               starts no backend the hook sees (TensorFlow, PyTorch/XLA)
``hook_error`` the hook could not record something (a jax release it does not know)

Unknown records and keys are ignored, so the hook can grow without breaking readers.

Module ids the hook could not learn are filled in by ``load``: a process's compilations, in
order, are matched with the modules in its dump folder(s), in id order, by name, and where
compilations ran at once, by their parameters (``module_ids``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_bugkit.run import module_ids
from xla_bugkit.run.evidence import Event, ProcessEvidence, SavedInputs, Uncaught

PROCESSES = "processes"  # the folder under the work dir


def load(work: Path) -> tuple[ProcessEvidence, ...]:
    """Every process that recorded evidence under ``work``, oldest first. Damaged lines (the
    one being written at a crash) are skipped."""
    return read(work / PROCESSES)


def read(folder: Path) -> tuple[ProcessEvidence, ...]:
    """``load`` of the records in ``folder`` itself."""
    if not folder.is_dir():
        return ()
    found = [_load_one(path) for path in folder.glob("*.jsonl")]
    return tuple(sorted((p for p in found if p is not None), key=lambda p: p.pid_order))


def records_of(folder: Path, kind: str) -> list[dict[str, Any]]:
    """Every record of ``kind`` in ``folder``'s process files, in file order per process."""
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return [r for path in paths for r in _records(path) if r["e"] == kind]


def _records(path: Path) -> Iterable[dict[str, Any]]:
    with path.open("rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("e"), str):
                yield record


# Long and complex on purpose: one branch per kind of record the hook writes, read as one
# table beside the state they fill.
def _load_one(path: Path) -> _Loaded | None:  # noqa: C901, PLR0915
    start: dict[str, Any] = {}
    backends: list[dict[str, Any]] = []
    events: dict[tuple[str, int], dict[str, Any]] = {}
    rlimits: dict[str, tuple[int, int]] = {}
    exit_record: dict[str, Any] | None = None
    asked_exit: int | None = None
    inputs: list[SavedInputs] = []
    uncaught: list[Uncaught] = []
    answered = False
    user_dump_dir: str | None = None
    interpret: str | None = None
    imported: dict[str, str] = {}
    for r in _records(path):
        kind = r["e"]
        if kind == "start":
            if start:
                # The process's next image (os.execv keeps the pid): what it records is
                # the process now; the previous image's calls are history.
                backends, events, exit_record, inputs, asked_exit = [], {}, None, [], None
            start = r
            rlimits.update(_limits(r.get("rlimits")))
        elif kind == "backend":
            backends.append(r)
        elif kind == "versions":
            imported.update(_strings(r.get("versions")))
        elif kind in ("compile", "execute") and isinstance(r.get("n"), int):
            events[(kind, r["n"])] = dict(r)
            asked_exit = None  # the program caught its SystemExit and went on
        elif kind in ("compiled", "executed") and isinstance(r.get("n"), int):
            _end(events.get(({"compiled": "compile", "executed": "execute"}[kind], r["n"])), r)
        elif kind == "ready" and (begun := events.get(("execute", _int(r.get("n")) or -1))):
            begun["ready"] = True
            if isinstance(r.get("error"), str):
                begun["error"] = r["error"]
        elif kind == "args" and isinstance(r.get("n"), int) and isinstance(r.get("file"), str):
            begun = events.get(("execute", r["n"]))
            if begun is not None:
                begun["args"] = path.parent / r["file"]
        elif kind == "shards" and isinstance(r.get("n"), int) and isinstance(r.get("file"), str):
            begun = events.get(("execute", r["n"]))
            if begun is not None:
                begun["shards"] = path.parent / r["file"]
        elif kind == "outputs" and isinstance(r.get("n"), int) and isinstance(r.get("file"), str):
            begun = events.get(("execute", r["n"]))
            if begun is not None:
                begun["outputs"] = path.parent / r["file"]
        elif kind == "pallas_interpret":
            interpret = r["error"] if isinstance(r.get("error"), str) else ""
        elif kind == "inputs" and isinstance(r.get("n"), int) and isinstance(r.get("file"), str):
            fun, framework = str(r.get("fun") or ""), str(r.get("framework") or "")
            inputs.append(SavedInputs(r["n"], fun, path.parent / r["file"], framework))
        elif kind == "rlimit" and isinstance(r.get("name"), str):
            rlimits.update(_limits({r["name"]: [r.get("soft"), r.get("hard")]}))
        elif kind == "exit":
            exit_record = r
        elif kind == "exiting":
            asked_exit = _int(r.get("status"))
        elif kind == "dump_to_replaced" and isinstance(r.get("folder"), str):
            user_dump_dir = r["folder"]
        elif kind == "state" and "error" not in r:
            answered = True
        elif kind == "uncaught" and all(isinstance(r.get(k), str) for k in _UNCAUGHT):
            uncaught.append(Uncaught(*(r[k] for k in _UNCAUGHT)))
    if not isinstance(start.get("pid"), int):
        return None
    if exit_record is None:  # an exit flushes nothing: only a process that never exited
        for e in events.values():
            if e["e"] == "execute" and e.get("pending") and not e.get("ready"):
                e["ended"], e["on_device"] = None, True
    stack_file = path.with_name(f"{start['pid']}.stack.txt")
    stack = stack_file.read_text(errors="replace") if stack_file.is_file() else None
    stack = _without_listener(stack) if stack else stack
    # XLA read its flags when the first backend started; an accelerator's describes the run.
    first = backends[0] if backends else {}
    main = next((b for b in backends if b.get("platform") != "cpu"), first)
    dump_dir = Path(first["dump_dir"]) if isinstance(first.get("dump_dir"), str) else None
    ordered = sorted(events.values(), key=lambda r: (r.get("t", 0.0), r["n"]))
    module_ids.fill(ordered, dump_dir)
    return _Loaded(
        pid=start["pid"],
        ppid=_int(start.get("ppid")) or 0,
        argv=tuple(str(a) for a in start.get("argv", ()) if isinstance(a, str)),
        events=tuple(_event(r) for r in ordered),
        rank=_int(main.get("rank")),
        processes=_int(main.get("processes")),
        devices=_int(main.get("devices")),
        platform=str(main.get("platform") or ""),
        env=_strings(first.get("env")),
        jax_config=_strings(first.get("jax_config")),
        dump_dir=dump_dir,
        rlimits=rlimits,
        stack=stack or None,
        exited=exit_record is not None,
        exit_status=_int(exit_record.get("status")) if exit_record else None,
        exit_how=str(exit_record.get("how") or "") if exit_record else "",
        exited_at=_float(exit_record.get("t")) if exit_record else None,
        asked_exit=asked_exit,
        local_devices=_int(main.get("local_devices")),
        device_kind=str(main.get("device_kind") or ""),
        device_list=_texts(main.get("device_list")),
        platform_version=" ".join(str(main.get("platform_version") or "").split()),
        inputs=tuple(inputs),
        versions={**imported, **_strings(main.get("versions"))},
        answered=answered,
        uncaught=tuple(uncaught),
        user_dump_dir=user_dump_dir,
        pallas_interpret=interpret,
        pid_order=float(start.get("t", 0.0)),
    )


_UNCAUGHT = ("where", "type", "error")  # an ``uncaught`` record's fields, in Uncaught's order

# faulthandler's block for the hook's own listening thread (``hook.recorder._listen``).
_LISTENER = re.compile(
    r"^Thread 0x[0-9a-f]+ \(most recent call first\):\n"
    r'  File "[^"\n]*[/\\]xla_bugkit[/\\]run[/\\]hook[/\\]recorder\.py", line \d+ in _answering\n'
    r"(?:  File [^\n]*\n)*\n?",
    re.M,
)


def _without_listener(stack: str) -> str:
    """The stack without the hook's listening thread: it is not the program's, and it names
    where xla-bugkit is installed."""
    return _LISTENER.sub("", stack)


def _end(begun: dict[str, Any] | None, r: dict[str, Any]) -> None:
    if begun is None:
        return
    begun["ended"] = r.get("t", 0.0)
    if isinstance(r.get("id"), int):
        begun["id"] = r["id"]
    if isinstance(r.get("error"), str):
        begun["error"] = r["error"]
    if r.get("pending") is True:
        begun["pending"] = True


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
        outputs=r.get("outputs") if isinstance(r.get("outputs"), Path) else None,
        shards=r.get("shards") if isinstance(r.get("shards"), Path) else None,
        error=r["error"] if isinstance(r.get("error"), str) else None,
        dump_to=Path(r["dump_to"]) if isinstance(r.get("dump_to"), str) else None,
        seen=str(r.get("seen") or ""),
        on_device=bool(r.get("on_device")),
        fed_by=tuple(sorted({n for n in r.get("fed") or () if _int(n) is not None}))
        if isinstance(r.get("fed"), list)
        else (),
        options=tuple(o for o in r.get("options") or () if isinstance(o, str))
        if isinstance(r.get("options"), list)
        else (),
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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


def _texts(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()
