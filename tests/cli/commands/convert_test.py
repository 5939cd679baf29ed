"""``xla-bugkit convert`` on real dumps: every form to every other, and still the same bug.

The module that crashes XLA's CPU compiler (``compile_crash``: a CHECK under
``--xla_disable_all_hlo_passes``) goes through HLO text, StableHLO text and bytecode and back
to an ``.hlo.pb``; the replay of what comes out crashes on the same CHECK. Bad input is a
one-line error that writes nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode
from xla_bugkit.hlo import hlo_proto, protowire

pytestmark = pytest.mark.slow  # real programs, real conversion children

CRASH_FLAG = "--xla_disable_all_hlo_passes=true"


def crashing_module(program_runs: ProgramRuns) -> Path:
    dump = program_runs["compile_crash"].dump_dir
    (hlo,) = dump.glob("module_*.jit_add_noise.before_optimizations.hlo.pb")
    return hlo


def convert(*argv: str | Path) -> int:
    return main(["convert", "-q", *map(str, argv)])


def test_every_form_and_back_still_crashes_on_the_same_check(
    program_runs: ProgramRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = crashing_module(program_runs)
    back_name = "module_0001.jit_add_noise.before_optimizations.hlo.pb"  # as replay reads it
    chain = [tmp_path / name for name in ("m.txt", "m.mlir", "m.mlirbc", back_name)]
    for before, after in zip([source, *chain], chain, strict=False):
        assert convert(before, after) == ExitCode.OK, capsys.readouterr().err
    text, mlir = chain[0].read_text(), chain[1].read_text()
    assert text.startswith("HloModule jit_add_noise") and 'op_name="jit(add_noise)' in text
    assert "stablehlo." in mlir and "func.func" in mlir
    assert chain[2].read_bytes().startswith(b"ML\xefR")
    back = hlo_proto.read_hlo_proto(chain[3])  # an HloProto, as XLA dumps it
    assert back.hlo_module.name == "jit_add_noise"
    capsys.readouterr()
    argv = ["replay", "-q", "--json", "--flags", CRASH_FLAG, str(chain[3])]
    assert main(argv) == ExitCode.OK
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["failure"]["kind"] == "compile crash"
    assert "Check failed: const_instr == nullptr" in verdict["failure"]["headline"]


def test_short_text_has_no_metadata_and_parses_back(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    short = tmp_path / "old.txt"
    assert convert("--to", "hlo-short", crashing_module(program_runs), short) == ExitCode.OK
    text = short.read_text()
    assert text.startswith("HloModule jit_add_noise")
    assert "metadata=" not in text and "FileNames" not in text and "StackFrames" not in text
    assert convert(short, tmp_path / "again.pb") == ExitCode.OK


def test_a_snapshot_gives_its_module_and_says_it_is_the_optimized_one(
    program_runs: ProgramRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = sorted(program_runs["success"].dump_dir.glob("*jit_train_step.snapshot.*.pb"))[0]
    out = tmp_path / "snapshot.txt"
    assert main(["convert", str(snapshot), str(out)]) == ExitCode.OK
    assert out.read_text().startswith("HloModule jit_train_step")
    err = capsys.readouterr().err
    assert "holds the module after optimizations" in err
    assert f"wrote {out}" in err


def test_the_graph_page_carries_the_dot_and_no_markup_from_it(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    source = crashing_module(program_runs)
    dot, page = tmp_path / "g.dot", tmp_path / "g.html"
    assert convert(source, dot) == ExitCode.OK and convert(source, page) == ExitCode.OK
    graph = dot.read_text()
    assert graph.startswith("digraph") and "<b>" in graph  # XLA's labels are HTML
    html = page.read_text()
    assert html.count("<script") == html.count("</script>") == 3  # the page's own, only
    embedded = re.search(r"const dot = (\".*\");", html)
    assert embedded is not None and "<" not in embedded.group(1)
    # The same graph; XLA numbers its nodes afresh each time it renders one.
    digits = re.compile(r"\d+")
    assert digits.sub("N", json.loads(embedded.group(1))) == digits.sub("N", graph)


def test_what_is_no_module_is_a_clear_error_that_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage, broken = tmp_path / "garbage.bin", tmp_path / "broken.txt"
    garbage.write_bytes(bytes(range(256)) * 8)
    broken.write_text(
        "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] frob(p)\n}\n"
    )
    for source, says in ((garbage, "neither HLO text"), (broken, "cannot parse the HLO")):
        out = tmp_path / f"{source.stem}.pb"
        assert convert(source, out) == ExitCode.ERROR
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err
        assert not out.exists() and not list(tmp_path.glob(".*partial"))
    # An OUT that is there is replaced only when asked.
    kept = tmp_path / "kept.txt"
    kept.write_text("mine")
    assert convert(broken, kept) == ExitCode.ERROR
    assert "give --force" in capsys.readouterr().err and kept.read_text() == "mine"
    assert convert(broken, tmp_path / "x.weird") == ExitCode.ERROR
    assert "no form for this suffix" in capsys.readouterr().err


def test_a_snapshots_inputs_in_the_form_run_hlo_module_reads(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    snapshot = sorted(program_runs["success"].dump_dir.glob("*jit_train_step.snapshot.*.pb"))[0]
    out = tmp_path / "inputs.literals.pb"
    assert convert("--to", "literals", snapshot, out) == ExitCode.OK
    # RunHloModuleLiterals: iterations (1), each with its arguments (2), in order.
    (iteration,) = list(protowire.fields(out.read_bytes()))
    assert iteration.number == 1
    arguments = list(protowire.fields(iteration.payload))
    recorded = hlo_proto.read_snapshot(snapshot).arguments
    assert len(recorded) > 0 and [f.number for f in arguments] == [2] * len(recorded)
    assert [bytes(f.payload) for f in arguments] == [a.SerializeToString() for a in recorded]
