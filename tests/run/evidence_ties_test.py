"""Each recorded call tied to its own module by what the runtime said, not by the order the
hook saw it: compilations that ran at once on two threads, and an error that a later call
met on an earlier execution's outputs. The records and dump headers are real, from runs of
tests/programs/concurrent_compile_oom.py and aot_pending_oom.py (jax 0.10.2, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xla_bugkit.run import evidence, evidence_files

DATA = Path(__file__).parent / "data" / "records"
# The two compile records of one run, as the hook wrote them: the threads reached the hook
# in one order and wrote their clocks in the other (t decides the order read).
COMPILES_AT_ONCE = (DATA / "compiles_at_once.jsonl").read_text()
# Each module's first line in its before_optimizations.txt: XLA numbered them either way.
SMALL = (DATA / "jit_affinity_f32_256.txt").read_text()
LARGE = (DATA / "jit_affinity_f32_2097152.txt").read_text()
# An ahead-of-time executable's error, met by the next call on its outputs.
AOT_MET_LATER = (DATA / "aot_met_later.jsonl").read_text()
# A jitted call's error met two calls later (``x[0, 0]``: dynamic_slice, then squeeze), each
# error surfacing only as the outputs were computed.
MET_TWO_CALLS_LATER = (DATA / "met_two_calls_later.jsonl").read_text()


def load(work: Path, records: str, dump: Path | None = None) -> evidence.ProcessEvidence:
    folder = work / evidence_files.PROCESSES
    folder.mkdir(parents=True, exist_ok=True)
    begin = {"e": "start", "t": 1.0, "pid": 7, "ppid": 1, "argv": ["x.py"], "cwd": "/"}
    backend = {"e": "backend", "t": 1.5, "platform": "cpu", "dump_dir": str(dump or work)}
    head = "".join(json.dumps(r) + "\n" for r in (begin, backend))
    (folder / "7.jsonl").write_text(head + records)
    (p,) = evidence_files.load(work)
    return p


@pytest.mark.parametrize("numbered", [(SMALL, LARGE), (LARGE, SMALL)], ids=["small0", "large0"])
def test_compiles_at_once_take_the_modules_of_their_own_parameters(
    tmp_path: Path, numbered: tuple[str, str]
) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    for i, header in enumerate(numbered):
        (dump / f"module_000{i}.jit_affinity.before_optimizations.txt").write_text(header)
        (dump / f"module_000{i}.jit_affinity.before_optimizations.hlo.pb").write_bytes(b"")
    large = numbered.index(LARGE)
    p = load(tmp_path, COMPILES_AT_ONCE, dump)
    ids = {(e.kind, e.shapes or e.n): e.id for e in p.events}
    assert ids[("compile", "tensor<2097152xf32>")] == large
    assert ids[("compile", "tensor<256xf32>")] == 1 - large
    # Each execution runs its own compilation's module: n 3 ran compile 1 (the large one).
    assert (ids[("execute", 3)], ids[("execute", 4)]) == (large, 1 - large)


def test_same_name_modules_whose_parameters_cannot_be_told_go_in_order(tmp_path: Path) -> None:
    """Without the text of the modules (protos only), the k-th compilation of a name is the
    k-th such module dumped, as before."""
    dump = tmp_path / "dump"
    dump.mkdir()
    for i in (0, 1):
        (dump / f"module_000{i}.jit_affinity.before_optimizations.hlo.pb").write_bytes(b"")
    p = load(tmp_path, COMPILES_AT_ONCE, dump)
    # Read in clock order: compile 2 (t ...001) first.
    assert [(e.n, e.id) for e in p.events if e.kind == "compile"] == [(2, 0), (1, 1)]


def test_an_error_met_by_a_later_call_on_its_outputs_is_the_call_that_made_it(
    tmp_path: Path,
) -> None:
    p = load(tmp_path, AOT_MET_LATER)
    spread = next(e for e in p.events if e.module == "jit_spread" and e.kind == "execute")
    assert spread.fed_by == (3,) and spread.error is not None
    assert p.raised is not None
    assert (p.raised.kind, p.raised.module, p.raised.n) == ("execute", "jit_nearest_gap", 3)
    assert p.made_error(spread) is p.raised


def test_an_error_met_two_calls_later_is_traced_to_the_first(tmp_path: Path) -> None:
    p = load(tmp_path, MET_TWO_CALLS_LATER)
    assert p.raised is not None and (p.raised.module, p.raised.n) == ("jit_affinity", 3)
    # The small batch's slice took only the small batch's outputs, which were fine.
    fine = next(e for e in p.events if e.n == 9)
    assert fine.fed_by == (5,) and p.made_error(fine) is fine


def test_a_call_that_raised_on_its_own_inputs_is_its_own_error(tmp_path: Path) -> None:
    """No ``fed``: an error the call raised itself (the record before the hook named the
    makers of a call's inputs reads the same)."""
    records = AOT_MET_LATER.replace(', "fed": [3]', "")
    p = load(tmp_path, records)
    assert p.raised is not None and p.raised.module == "jit_spread"


def test_an_error_the_watcher_missed_is_told_by_the_call_that_took_its_outputs(
    tmp_path: Path,
) -> None:
    """The program dropped the large batch's matrix (``x[0, 0]`` kept only a slice) before
    the watcher's poll, whose ``ready`` for it (the last records) says nothing of an error;
    the slice's call found that its input held one, and said whose (``ready`` of n 3 with
    the error)."""
    p = load(tmp_path, (DATA / "met_after_its_outputs_were_dropped.jsonl").read_text())
    assert p.raised is not None and (p.raised.module, p.raised.n) == ("jit_affinity", 3)
    assert p.raised.error == (
        "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 17592186044416 bytes."
    )
