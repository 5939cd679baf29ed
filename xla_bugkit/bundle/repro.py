"""The bundle's standalone reproducer: ``repro.py``, and the arrays it reads.

A maintainer should see the bug with ``python repro.py`` and nothing but jax, jaxlib and
numpy installed. jaxlib ships no Python classes for XLA's protos: repro.py reads the bundled
snapshot's arguments itself, from the wire form (the element types it holds are spelled out in
the script, ``literal.wire_form``), so the arguments travel once. Extreme values the replay
showed a wrong result on travel as ``inputs.npz``, and the reference outputs of collect's
replay as ``expected.npz`` (both laid out as ``replay.protocol.save_arrays`` writes them).
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xla_bugkit import platforms
from xla_bugkit._version import __version__
from xla_bugkit.bundle import issue, members
from xla_bugkit.choose.dumps import Role
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.kinds import KINDS, Kind, Shows
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.parser import custom_call_targets
from xla_bugkit.replay import compare_outputs, extreme, protocol
from xla_bugkit.replay.child.replayable import INTERNAL_TARGETS
from xla_bugkit.verdict import INTERPRET_MODE, Outcome, Verdict

TEMPLATE = "repro.py.in"
# Reference outputs larger than this stay out of the bundle: verify recomputes them anyway.
EXPECTED_LIMIT = 8 * 1000 * 1000
HANG_SECONDS = 60  # how long repro.py waits before it calls a run a hang
_REFERENCE_STEMS = {
    "op-by-op": protocol.OPBYOP,
    "conservative flags": protocol.CONSERVATIVE,
    # A Pallas kernel's outputs under the interpret mode, which the program recorded at
    # collect: repro.py on a TPU holds the compiled kernel to them.
    INTERPRET_MODE: protocol.INTERPRETED,
}
_SHOWN = {
    Outcome.REPRODUCED_CRASH: Shows.CRASH,
    Outcome.REPRODUCED_ERROR: Shows.ERROR,
    Outcome.REPRODUCED_HANG: Shows.HANG,
    Outcome.REPRODUCED_WRONG: Shows.WRONG_RESULT,
}


@dataclass(frozen=True)
class Repro:
    """What the bundle holds to reproduce one module, and what ISSUE.md shows of it."""

    module: str  # the module's label
    script: bool  # repro.py was written
    before_text: str  # the module's before-optimizations HLO text in the bundle ("": none)
    hlo_command: str  # the run_hlo_module command line for the module
    inputs: str  # the entry's parameter types, "f64[16385,3]"
    recorded_inputs: bool  # repro.py runs on the reporter's inputs (the bundled snapshot's)
    reference: str  # what expected.npz holds ("op-by-op"), "" when it is not there
    wrong_values: tuple[tuple[str, str, str], ...] = ()  # (index, reference, XLA)
    notes: tuple[str, ...] = ()  # why something is missing
    missing: str = ""  # why repro.py is not there ("": it is)
    # What inputs.npz holds when not the reporter's: the extreme values the replay showed
    # the failure on ("extreme values: inf/nan (seed 42)"); "" when it is not there.
    extreme_inputs: str = ""


@dataclass(frozen=True)
class Target:
    """The module to reproduce: its files in the staged bundle, by role, and its replay."""

    label: str
    files: Mapping[str, str]  # role -> path inside the bundle
    platform: str
    verdict: Verdict | None
    arrays: Path | None  # the replay's saved arrays (test.npz, opbyop.npz, ...)


def write(
    stage: Path,
    target: Target,
    *,
    saw: str,
    kind: Kind,
    user_flags: Sequence[str] = (),
    memory_cap: int | None = None,
    tpu_args: Sequence[str] = (),
) -> Repro | None:
    """Write repro.py (and inputs.npz, expected.npz) for ``target`` into ``stage``.

    ``saw`` is how the reporter's run ended (redacted); ``kind`` its failure kind;
    ``user_flags`` the reporter's own XLA_FLAGS (for flags the debug options cannot spell);
    ``memory_cap`` the address-space limit the program set itself, which repro.py sets too;
    ``tpu_args`` the run's LIBTPU_INIT_ARGS, which repro.py sets on a TPU (those a replay
    admits: ``flags.admit_tpu``).
    None when the bundle has no before-optimizations proto of the module: there is nothing
    to compile.
    """
    proto = target.files.get(Role.BEFORE_PROTO.value)
    if proto is None:
        return None
    header = _header(stage, target.files)
    platform = "gpu" if "gpu" in target.platform else target.platform or "cpu"
    notes: list[str] = []
    xla_flags = _flags(stage, target.files, user_flags, notes)
    encodings = _recorded_inputs(stage, target.files, notes)
    recorded = encodings is not None
    held = "snapshot" if recorded else _write_extreme(stage, proto, target.verdict, notes)
    reference = _write_expected(stage, target, held, notes)
    script = _refusal(header, target.verdict)
    if script is None:
        values = {
            "label": re.sub(r"[^\w.-]", "_", target.label),
            "version": __version__,
            "module": repr(proto),
            "snapshot": f"HERE / {target.files[Role.SNAPSHOT.value]!r}" if recorded else "None",
            "encodings": repr(encodings or {}),
            "flags": repr(list(xla_flags)),
            "tpu_args": repr(list(_tpu_args(platform, tpu_args, notes))),
            "platform": repr(platform),
            "saw": repr(" ".join(saw.split())),
            "expect": repr(_expect(target.verdict, kind, bool(reference))),
            "reference": repr(reference or "reference"),
            "hang_seconds": str(HANG_SECONDS),
            "memory_cap": repr(memory_cap),
            "inputs_note": repr(f"{held}, the values xla-bugkit's replay showed it on"),
        }
        text = issue.load_template(TEMPLATE).substitute(values)
        (stage / members.REPRO).write_text(text, "utf-8")
    else:
        notes.append(f"{members.REPRO} is not in the bundle: {script}")
    unfit = _not_for_run_hlo_module(stage, target)
    if unfit:
        notes.append(f"no run_hlo_module command: {unfit}")
    return Repro(
        module=target.label,
        script=script is None,
        missing=script or "",
        before_text=target.files.get(Role.BEFORE_TEXT.value, ""),
        hlo_command=""
        if unfit
        else hlo_command(target.files, platform, xla_flags, memory_cap, _devices(header)),
        inputs=_parameters(header),
        recorded_inputs=recorded,
        extreme_inputs=held if held != "snapshot" else "",
        reference=reference,
        wrong_values=_wrong_values(target, reference),
        notes=tuple(notes),
    )


# What ``convert --to literals`` writes the bundled snapshot's arguments to, for run_hlo_module.
LITERALS = "inputs.literals.pb"


def hlo_command(
    files: Mapping[str, str],
    platform: str,
    xla_flags: tuple[str, ...],
    memory_cap: int | None = None,
    devices: int = 1,
) -> str:
    """XLA's ``run_hlo_module`` command line for the module, with the flags in force; with
    the recorded inputs when the bundle has them, after the line that writes them in the
    form it reads (a wrong result may show only on them); under the program's own memory
    cap, in a subshell, when it set one (an allocation failure may need it). A CPU module of
    ``devices`` devices gets as many host devices (a process of a job of several had fewer:
    the module was compiled for the whole job's)."""
    found = platforms.find(platform)
    if found is not None and found.host_devices and devices > 1:
        xla_flags = (
            *(f for f in xla_flags if not f.startswith(f"{flags.HOST_DEVICE_COUNT}=")),
            f"{flags.HOST_DEVICE_COUNT}={devices}",
        )
    text = files.get(Role.BEFORE_TEXT.value)
    path, fmt = (text, "hlo") if text else (files.get(Role.BEFORE_PROTO.value, ""), "pb")
    argv = ["run_hlo_module", f"--platform={platform}", f"--input_format={fmt}", *xla_flags]
    snapshot = files.get(Role.SNAPSHOT.value)
    lines = [shlex.join([*argv, path])]
    if snapshot is not None:
        write = ["xla-bugkit", "convert", "--to", "literals", snapshot, LITERALS]
        lines = [shlex.join(write), shlex.join([*argv, f"--input_literals_file={LITERALS}", path])]
    if memory_cap:
        lines[-1] = f"(ulimit -v {memory_cap // 1024} && {lines[-1]})"
    return "\n".join(lines)


def _header(stage: Path, files: Mapping[str, str]) -> str:
    text = files.get(Role.BEFORE_TEXT.value)
    if text is None:
        return ""
    with (stage / text).open(encoding="utf-8", errors="replace") as f:
        return f.readline()


def _flags(
    stage: Path, files: Mapping[str, str], user_flags: Sequence[str], notes: list[str]
) -> tuple[str, ...]:
    """The flags in the dumped debug options, then the reporter's own flags those cannot
    spell (``flags.in_force``), as a replay applies them (``flags.admit``).

    A map such as xla_backend_extra_options prints as a block no flag can spell; the
    reporter's own flag of that name stands in for it, or it is left out (and said so).
    """
    options = files.get(Role.DEBUG_OPTIONS.value)
    if options is None:
        return ()
    text = (stage / options).read_text("utf-8", "replace")
    admitted = flags.admit(flags.in_force(flags.from_debug_options(text), user_flags))
    notes += [f"{members.REPRO} leaves out {withheld}" for withheld in admitted.withheld]
    result = admitted.flags
    spelled = {flags.name_of(f) for f in result}
    for name in dict.fromkeys(_BLOCK.findall(text)):
        if f"--{name}" not in spelled:
            notes.append(f"{members.REPRO} leaves out --{name}: no flag spells its value")
    return result


def _tpu_args(platform: str, recorded: Sequence[str], notes: list[str]) -> tuple[str, ...]:
    """The run's LIBTPU_INIT_ARGS that repro.py sets, on a TPU alone; those it withholds
    go to ``notes``."""
    found = platforms.find(platform)
    if found is None or found.compiler_env is None:
        return ()
    admitted = flags.admit_tpu(recorded)
    notes += [f"{members.REPRO} leaves out {withheld}" for withheld in admitted.withheld]
    return admitted.flags


# A map or sub-message in the debug options ("xla_backend_extra_options {" or "...: {").
_BLOCK = re.compile(r"^\s*(xla_\w+)(?::)?\s*\{", re.M)


def _not_for_run_hlo_module(stage: Path, target: Target) -> str:
    """Why XLA's ``run_hlo_module`` cannot run the module from its HLO ("": it can): the
    replay refused it (a host callback), or Shardy's markers, which only its partitioner
    compiles, from the PJRT folder's StableHLO."""
    if target.verdict is not None and target.verdict.outcome is Outcome.NOT_REPLAYABLE:
        return f"the module cannot be replayed ({target.verdict.evidence})"
    found = platforms.find(target.platform)
    if found is not None and not found.run_hlo_module:
        return (
            f"no public build of run_hlo_module runs on {found.needs}: replay the module "
            "there with repro.py or xla-bugkit verify"
        )
    text = target.files.get(Role.BEFORE_TEXT.value)
    if text is None:
        return ""
    try:
        hlo = (stage / text).read_text("utf-8", "replace")
    except OSError:
        return ""
    shardy = next((t for t in custom_call_targets(hlo) if t.startswith(_SHARDY)), None)
    if shardy is None or shardy in INTERNAL_TARGETS:
        return ""
    return (
        f"the module is partitioned with Shardy (custom-call {shardy}), which only compiles "
        "from the PJRT folder's StableHLO (xla-bugkit verify replays it so)"
    )


_SHARDY = "xla.sdy."


def _devices(header: str) -> int:
    """The devices the module runs on, from its HLO header (replicas x partitions)."""
    counts = [int(n) for n in re.findall(r"\b(?:replica_count|num_partitions)=(\d+)", header)]
    return int(np.prod(counts)) if counts else 1


def _refusal(header: str, verdict: Verdict | None) -> str | None:
    """Why repro.py cannot run the module (None: it can)."""
    devices = _devices(header)
    if devices > 1:
        return f"the module runs on {devices} devices; xla-bugkit verify replays it"
    if verdict is not None and verdict.outcome is Outcome.NOT_REPLAYABLE:
        return f"the module cannot be replayed ({verdict.evidence})"
    return None


def _parameters(header: str) -> str:
    """The entry's parameter types from the HLO header, layouts left out."""
    m = re.search(r"entry_computation_layout=\{\((.*?)\)->", header)
    return re.sub(r"\{[^{}]*\}", "", m.group(1)) if m else ""


def _recorded_inputs(
    stage: Path, files: Mapping[str, str], notes: list[str]
) -> dict[int, tuple[int, str, str]] | None:
    """How repro.py reads the bundled snapshot's arguments: the wire form of each element
    type they hold (``literal.wire_form``); None when there is no snapshot it can read."""
    snapshot = files.get(Role.SNAPSHOT.value)
    if snapshot is None:
        return None
    from xla_bugkit.hlo import hlo_proto, literal

    try:
        shapes = hlo_proto.argument_shapes(stage / snapshot)
        if any(s.element_type == hlo_proto.PrimitiveType.TUPLE for s in shapes):
            raise BugkitError("the module takes a tuple argument")
        return {s.element_type: literal.wire_form(s.element_type) for s in shapes}
    except BugkitError as e:
        notes.append(f"{members.REPRO} runs on other inputs than the recorded ones: {e}")
        return None


def _reference_file(target: Target) -> tuple[str, Path] | None:
    """The reference the replay judged by (or op-by-op, the most independent one)."""
    if target.verdict is None or target.arrays is None:
        return None
    named = str(target.verdict.numbers.get("reference", ""))
    for label in (named, *_REFERENCE_STEMS):
        stem = _REFERENCE_STEMS.get(label)
        if stem is not None and protocol.arrays_path(target.arrays, stem).is_file():
            return label, protocol.arrays_path(target.arrays, stem)
    return None


def _write_extreme(stage: Path, proto: str, verdict: Verdict | None, notes: list[str]) -> str:
    """inputs.npz holding the extreme values a wrong result showed on, when the replay found
    it on those and the bundle has no recorded inputs: repro.py then runs what verify ran.
    Returns the verdict's name for them, or "" when none are written."""
    found = None if verdict is None else extreme.parsed(verdict.inputs)
    if verdict is None or found is None or verdict.outcome is not Outcome.REPRODUCED_WRONG:
        return ""
    from xla_bugkit.hlo import hlo_proto, literal

    try:
        types = []
        for shape in hlo_proto.parameter_shapes(hlo_proto.read_hlo_proto(stage / proto)):
            dtype = literal.dtype_of(shape.element_type)
            if dtype is None or shape.tuple_shapes:
                raise BugkitError(f"a parameter of type {literal.type_name(shape.element_type)}")
            types.append((dtype, tuple(shape.dimensions)))
    except (BugkitError, ValueError) as e:
        notes.append(f"{members.INPUTS} is not in the bundle: {e}")
        return ""
    arrays = extreme.arrays(types, *found)
    protocol.save_arrays(stage / members.INPUTS, arrays)
    return verdict.inputs


def _write_expected(stage: Path, target: Target, held: str, notes: list[str]) -> str:
    """expected.npz; returns what computed it ("" when it is not written). ``held``: what
    inputs.npz holds ("snapshot", an extreme set's name, "" when there is none)."""
    found = _reference_file(target)
    if found is None or target.verdict is None:
        return ""
    label, path = found
    ran_on = target.verdict.inputs
    if ran_on != held and not (held == "" and ran_on.startswith("generated")):
        # repro.py runs on the inputs the bundle holds; a reference computed from other
        # inputs would make a correct result look wrong.
        notes.append(f"{members.EXPECTED} is not in the bundle: the replay ran on other inputs")
        return ""
    if path.stat().st_size > EXPECTED_LIMIT:
        notes.append(f"{members.EXPECTED} is not in the bundle: over {EXPECTED_LIMIT // 10**6} MB")
        return ""
    shutil.copyfile(path, stage / members.EXPECTED)
    return label


def _wrong_values(target: Target, reference: str) -> tuple[tuple[str, str, str], ...]:
    """The first differing elements of a wrong result: (index, reference value, XLA's)."""
    verdict, arrays = target.verdict, target.arrays
    if verdict is None or verdict.outcome is not Outcome.REPRODUCED_WRONG or arrays is None:
        return ()
    label = str(verdict.numbers.get("reference", reference))
    test = protocol.arrays_path(arrays, protocol.TEST)
    ref = protocol.arrays_path(arrays, _REFERENCE_STEMS.get(label, ""))
    if not (test.is_file() and ref.is_file()):
        return ()
    got, want = protocol.load_arrays(test), protocol.load_arrays(ref)
    rows = []
    for output, *index in compare_outputs(got, want).first_indices:
        where = f"output {output} {index}" if len(got) > 1 else str(index)
        rows.append((where, str(want[output][tuple(index)]), str(got[output][tuple(index)])))
    return tuple(rows)


def _expect(verdict: Verdict | None, kind: Kind, has_reference: bool) -> str:
    """What repro.py checks for (its ``EXPECT``): what the replay reproduced, else what a
    replay of the kind shows; a wrong result only where there is a reference to show it."""
    if verdict is not None and verdict.outcome in _SHOWN:
        return _SHOWN[verdict.outcome].value
    shows = KINDS[kind].replay_shows
    if shows in (Shows.WRONG_RESULT, Shows.NOTHING):
        return Shows.WRONG_RESULT.value if has_reference else ""
    return shows.value
