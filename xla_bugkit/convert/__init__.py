"""``xla-bugkit convert IN OUT``: a module from one form to another, without Bazel.

What XLA's ``hlo-opt`` converts (HLO text, the ``.hlo.pb`` proto, StableHLO as text or
bytecode), plus metadata-free text that older jaxlib releases parse, and a graph (DOT, or an
HTML page that renders it). The input's form is read from its content, never from its name;
the output's from OUT's suffix or ``--to``.

The input may come from anyone: the parent reads it with protobuf alone, and jaxlib parses
it in a child (``child``) under the replay's memory limit and a timeout, so that a CHECK in
XLA's parser stays there. OUT is written only when the child succeeded, all at once.

``carrier`` hands a replay under an older release the module as that metadata-free text.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from xla_bugkit import proc
from xla_bugkit.convert import graph
from xla_bugkit.convert.child import ERROR
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto, protowire
from xla_bugkit.proc import leftovers
from xla_bugkit.replay import memory_limit

# Output forms, and the suffixes that ask for them.
FORMS = {
    "hlo": "HLO text as XLA prints it, metadata included",
    "hlo-short": "HLO text without metadata, which older jaxlib releases parse",
    "pb": "an HloProto (.hlo.pb), as XLA dumps it",
    "stablehlo": "StableHLO, MLIR text",
    "mlirbc": "StableHLO, MLIR bytecode",
    "dot": "the module's graph, Graphviz DOT",
    "html": "the module's graph as a page that renders it",
    "literals": "an HloSnapshot's arguments as run_hlo_module's --input_literals_file reads them",
}
SUFFIXES = {".txt": "hlo", ".hlo": "hlo", ".pb": "pb", ".mlir": "stablehlo",
            ".mlirbc": "mlirbc", ".dot": "dot", ".html": "html"}  # fmt: skip
TIMEOUT = 600.0  # seconds; a module that takes longer to parse is not one to convert here

_MLIR_BYTECODE = b"ML\xefR"
CHILD = (sys.executable, "-m", "xla_bugkit.convert.child")


def output_form(out: Path, to: str | None) -> str:
    """The form to write: ``to``, or the one OUT's suffix names."""
    if to is not None:
        return to
    form = SUFFIXES.get(out.suffix.lower())
    if form is None:
        known = ", ".join(sorted(SUFFIXES))
        raise BugkitError(f"{out.name}: no form for this suffix (known: {known}); give --to")
    return form


def input_form(data: bytes) -> str:
    """What ``data`` holds: "hlo" or "mlir" text, "mlirbc", or "proto" (an HloProto, an
    HloSnapshot or a bare HloModuleProto)."""
    if data.startswith(_MLIR_BYTECODE):
        return "mlirbc"
    head = data[:4096].lstrip()
    if head.startswith(b"HloModule"):
        return "hlo"
    if head.startswith((b"module", b"#loc", b"func.func", b"//")) or b"func.func" in head:
        return "mlir"
    return "proto"


def module_of_proto(path: Path) -> tuple[bytes, str | None]:
    """The serialized HloModuleProto in a proto file, and a note when it is a snapshot's
    (whose module is the optimized one)."""
    try:
        return hlo_proto.module_bytes(hlo_proto.read_hlo_proto(path)), None
    except BugkitError:
        pass
    try:
        snapshot = hlo_proto.read_snapshot(path)
    except BugkitError:
        raise BugkitError(
            f"{path.name}: neither HLO text, StableHLO nor an HLO proto (HloProto, HloSnapshot)"
        ) from None
    note = (
        "an HloSnapshot holds the module after optimizations: "
        "replay the before_optimizations module instead"
    )
    return hlo_proto.module_bytes(snapshot.hlo), note


def convert(source: Path, out: Path, *, to: str | None = None, force: bool = False) -> list[str]:
    """Write ``source`` to ``out`` in the form asked for; returns notes for the user."""
    form = output_form(out, to)
    if out.exists() and not force:
        raise BugkitError(f"{out} exists; give --force to replace it")
    if out.resolve() == source.resolve():
        raise BugkitError("IN and OUT are the same file")
    if form == "literals":
        _write_whole(out, run_hlo_module_literals(source))
        return []
    data = hlo_proto.read_bytes(source)
    kind = input_form(data)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-convert-") as tmp:
        work = Path(tmp)
        given = work / "input"
        if kind == "proto":
            module, note = module_of_proto(source)
            notes += [note] if note else []
            given.write_bytes(module)
            kind = "module"
        else:
            given.write_bytes(data)
        result = _in_child(work, given, kind, form)
        if form == "pb":
            result = protowire.length_field(1, result)  # HloProto.hlo_module
        elif form == "html":
            result = graph.html(result.decode("utf-8"), title=source.name).encode("utf-8")
        _write_whole(out, result)
    return notes


def run_hlo_module_literals(snapshot: Path) -> bytes:
    """A serialized ``RunHloModuleLiterals`` of one iteration: the snapshot's arguments, as
    ``run_hlo_module --input_literals_file`` takes them (``iterations`` = 1, each one's
    ``arguments`` = 2). Protobuf alone: the literals are copied, never decoded."""
    arguments = hlo_proto.read_snapshot(snapshot).arguments
    iteration = b"".join(protowire.length_field(2, a.SerializeToString()) for a in arguments)
    return protowire.length_field(1, iteration)


def _in_child(work: Path, given: Path, kind: str, form: str) -> bytes:
    spec = {"input": str(given), "kind": kind, "form": "dot" if form == "html" else form,
            "out": str(work / "output")}  # fmt: skip
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the user's flags could make XLA dump or abort here
    done = proc.run_captured(
        [*CHILD, str(spec_path)],
        env=env,
        cwd=work,
        timeout=TIMEOUT,
        limits=proc.Limits(memory_bytes=memory_limit("cpu")),
    )
    if done.returncode == 0 and Path(spec["out"]).exists():
        return Path(spec["out"]).read_bytes()
    lines = [line for line in done.output.splitlines() if line.strip()]
    said = [line[len(ERROR) :] for line in lines if line.startswith(ERROR)]
    if said:
        raise BugkitError(said[-1])
    if done.timed_out:
        raise BugkitError(f"jaxlib did not finish converting the module in {TIMEOUT:.0f} s")
    status = done.returncode or 0
    how = f"signal {-status}" if status < 0 else "an error"
    last = lines[-1] if lines else "no output"
    raise BugkitError(f"jaxlib stopped with {how} converting the module: {last[:300]}")


def _write_whole(out: Path, data: bytes) -> None:
    """``data`` into ``out`` all at once (``leftovers.write_whole``)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        leftovers.write_whole(out, data)
    except OSError as e:
        raise BugkitError(f"cannot write {out}: {e.strerror or e}") from e
