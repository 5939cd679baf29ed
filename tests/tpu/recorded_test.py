"""TPU features, kept honest on a machine without one: bundles and manifests that collect
wrote on a real TPU v5e chip (jax 0.10.2, libtpu 0.0.42.1; recorded/README.md says how),
read here as a maintainer without a TPU reads them."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from xla_bugkit import platforms
from xla_bugkit.bundle import excused, report, triage, wording
from xla_bugkit.choose import allocation, dumps, mosaic
from xla_bugkit.choose.selection import Selection
from xla_bugkit.cli.commands import _summary
from xla_bugkit.cli.commands.verify import render_table
from xla_bugkit.cli.main import main
from xla_bugkit.collecting import bundling, driver
from xla_bugkit.collecting.options import CollectOptions, CollectResult, Dumps
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure import mosaic as mosaic_error
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import precision
from xla_bugkit.hlo.names import function_name, program_name
from xla_bugkit.replay import differential
from xla_bugkit.replay.inputs import replay_input
from xla_bugkit.replay.protocol import KERNEL_ONLY
from xla_bugkit.verdict import (
    CANNOT_INTERPRET,
    COMPILED_DIFFERS,
    INTERPRET_MODE,
    OWN_CODE,
    OWN_CODE_GIVES,
    Outcome,
    Verdict,
)
from xla_bugkit.verify import ModuleCheck, VerifyResult

RECORDED = Path(__file__).parent / "recorded"
UNCHECKED = f"ran to completion on the TPU; no reference: {KERNEL_ONLY}"
BUNDLES = sorted(RECORDED.glob("*.zip"))


def _manifest(name: str) -> dict:  # type: ignore[type-arg]
    path = RECORDED / f"{name}.manifest.json"
    if path.exists():
        return json.loads(path.read_text("utf-8"))  # type: ignore[no-any-return]
    with zipfile.ZipFile(RECORDED / f"{name}.zip") as z:
        return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]


def _triage(name: str) -> triage.Triage:
    m = _manifest(name)
    verdicts = [Verdict.from_json(x["replay"]) for x in m["modules"] if x.get("replay")]
    return triage.triage(Failure.from_json(m["failure"]), verdicts)


def _unpacked(name: str, into: Path) -> Path:
    with zipfile.ZipFile(RECORDED / f"{name}.zip") as z:
        z.extractall(into)
    return into


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.stem)
def test_every_module_of_a_tpu_bundle_is_a_tpu_module(bundle: Path) -> None:
    modules = _manifest(bundle.stem)["modules"]
    assert modules and {m["platform"] for m in modules} == {"tpu"}
    assert _manifest(bundle.stem)["versions"]["libtpu"] == "0.0.42.1"


def test_the_tpu_compilers_build_is_not_part_of_the_program_name() -> None:
    assert program_name("jit_add_noise.cl_933746096") == "jit_add_noise"
    assert program_name("jit_scatter-add.cl_933746096") == "jit_scatter-add"
    assert program_name("jit_f.cl_x") == "jit_f.cl_x"
    assert function_name("jit_add_noise.cl_933746096") == "jit(add_noise)"


def test_a_bundle_written_before_its_manifest_named_the_platform_is_known_by_its_topology(
    tmp_path: Path,
) -> None:
    unpacked = _unpacked("readme_example", tmp_path)
    (module,) = json.loads((unpacked / "manifest.json").read_text("utf-8"))["modules"]
    files = {role: unpacked / path for role, path in module["files"].items()}
    found = replay_input(module["label"], files, "")
    assert found is not None and found.platform == "tpu"
    del files[dumps.Role.TOPOLOGY.value]
    found = replay_input(module["label"], files, "")
    assert found is not None and found.platform == "cpu"  # no evidence left: the default


def test_a_dump_file_of_the_tpu_compiler_names_the_platform(tmp_path: Path) -> None:
    unpacked = _unpacked("readme_example", tmp_path / "bundle")
    dump = tmp_path / "dump"
    dump.mkdir()
    label = "module_0000.jit_add_noise.cl_933746096"
    before = next(unpacked.rglob("*.before_optimizations.txt"))
    (dump / before.name).write_bytes(before.read_bytes())
    assert dumps.index(dump).modules[0].platform == ""  # the names carry no prefix
    (dump / f"{label}.tpu_comp_env.txt").write_text("xla_tpu_...: true\n")
    (module,) = dumps.index(dump).modules
    assert module.label == label and module.platform == "tpu"


@pytest.mark.jax
@pytest.mark.parametrize("name", ["readme_example", "hbm_oom", "mosaic_unaligned"])
def test_verify_without_a_tpu_says_it_needs_one(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["verify", "--timeout", "120", str(RECORDED / f"{name}.zip")])
    out = capsys.readouterr().out
    assert code == ExitCode.UNVERIFIED, out
    assert "unverified: needs a TPU, which this machine lacks" in out
    assert "the recorded failure is unverified here: it needs a TPU" in out
    assert "reproduces here" not in out and "does NOT reproduce" not in out
    assert "pip install 'jax[tpu]==0.10.2'" in out


@pytest.mark.jax
def test_a_pallas_module_is_not_run_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(RECORDED / "mosaic_unaligned.zip")]) == ExitCode.UNVERIFIED
    out = capsys.readouterr().out
    assert "checked: custom calls: tpu_custom_call" in out
    assert "not run on the CPU: custom-call target 'tpu_custom_call'" in out


def test_mosaics_dumps_travel_with_the_module_whose_kernel_they_are() -> None:
    with zipfile.ZipFile(RECORDED / "mosaic_unaligned.zip") as z:
        names = z.namelist()
        manifest = json.loads(z.read("manifest.json"))
    kernel = [n for n in names if "/mosaic/" in n]
    assert len(kernel) == 13
    label = manifest["modules"][0]["label"]
    assert all(n.startswith(f"modules/{label}/mosaic/") for n in kernel)
    assert any(n.endswith("-mosaic-dump-anonymous-post-infer-memref-layout.txt") for n in kernel)


def test_mosaic_dumps_are_given_to_the_module_compiled_when_they_were_written(
    tmp_path: Path,
) -> None:
    unpacked = _unpacked("mosaic_unaligned", tmp_path / "bundle")
    kernel_text = next(unpacked.rglob("*.before_optimizations.txt")).read_bytes()
    assert mosaic.KERNEL_TARGET in kernel_text
    dump = tmp_path / "dump"
    (dump / mosaic.FOLDER).mkdir(parents=True)
    written = sorted(unpacked.rglob("mosaic/*.txt"))
    ns = int(written[0].name.split("-")[0])
    # Two modules with kernels: the first began before the dumps, the second after them.
    for n, began in ((1, ns / 1e9 - 5), (2, ns / 1e9 + 60)):
        path = dump / f"module_000{n}.jit_k{n}.cl_1.before_optimizations.txt"
        path.write_bytes(kernel_text)
        os.utime(path, (began, began))
    (dump / "module_0003.jit_plain.cl_1.before_optimizations.txt").write_text("HloModule p\n")
    for f in written:
        (dump / mosaic.FOLDER / f.name).write_bytes(f.read_bytes())
    index = dumps.index(dump)
    found = mosaic.dumps_of(index, index.modules)
    assert set(found) == {"module_0001.jit_k1.cl_1"}
    assert [p.name for p in found["module_0001.jit_k1.cl_1"]] == [f.name for f in written]


def test_a_mosaic_error_is_named_by_its_code_page_and_kernel_line() -> None:
    with zipfile.ZipFile(RECORDED / "mosaic_unaligned.zip") as z:
        log = z.read("log.txt").decode()
    found = mosaic_error.find(log)
    assert found is not None
    assert (found.code, found.name) == ("E2003", "CompileTimeMosaicUnprovenMemoryAccessAlignment")
    assert found.page == "https://openxla.org/xla/errors/error_2003"
    assert (found.kernel, found.source) == ("window_kernel", "mosaic_unaligned.py:14")
    assert found.message.startswith("cannot statically prove that index in dimension 1")
    failure = Failure.from_json(_manifest("mosaic_unaligned")["failure"])
    title = wording.title(_triage("mosaic_unaligned"), failure, "tpu")
    assert title.startswith("Pallas TPU kernel refused by Mosaic: E2003 CompileTimeMosaic")


@pytest.mark.parametrize(("name", "need"), [("hbm_oom", "48.03G"), ("heldout_oom_train", "64.51G")])
def test_a_module_larger_than_the_chip_is_not_called_an_xla_bug(name: str, need: str) -> None:
    judged = _triage(name)
    assert not judged.xla
    assert judged.reason.startswith(
        f"the module needs {need} of the accelerator's memory (HBM) at once and the chip has "
        "15.75G: the program is too large for this chip"
    )


def test_the_largest_buffers_come_from_the_memory_usage_report(tmp_path: Path) -> None:
    unpacked = _unpacked("hbm_oom", tmp_path)
    report = next(unpacked.rglob("*-memory-usage-report.txt")).read_text("utf-8")
    largest = allocation.largest_allocations(report, 2)
    assert largest[0] == "24.00GiB: 2\u00d7f32[1536,2048,2048], 2\u00d7s32[1536,2048,2048]"
    failure = Failure.from_json(_manifest("hbm_oom")["failure"])
    said = excused.reason(failure, largest_buffers=largest)
    assert said is not None and "(largest: 24.00GiB: 2\u00d7f32[1536,2048,2048]" in said


@pytest.mark.parametrize("name", ["precision_check", "heldout_precision"])
def test_a_difference_only_the_default_precision_makes_is_said_with_the_fix(name: str) -> None:
    judged = _triage(name)
    assert not judged.xla
    assert "runs its float32 matmuls at the TPU's default precision, one bfloat16 pass" in (
        judged.reason
    )
    assert "precision=jax.lax.Precision.HIGHEST" in judged.reason


def test_the_eager_modules_wrong_result_is_the_culprit() -> None:
    # jax-ml/jax#39025: the eager scatter-add (the gradient of x[:, idx, :]) is wrong on this
    # libtpu; the jitted function that computes the same is right.
    modules = _manifest("eager_gather_grad")["modules"]
    first = modules[0]
    assert first["label"] == "module_0057.jit_scatter-add.cl_933746096"
    assert first["replay"]["outcome"] == "reproduced: wrong result"
    assert first["replay"]["inputs"] == "snapshot"
    assert first["replay"]["numbers"]["reference"] == "op-by-op"
    judged = _triage("eager_gather_grad")
    assert judged.xla and judged.where == "jit(scatter-add)"


def test_a_pallas_wrong_value_rests_on_the_programs_check_alone() -> None:
    m = _manifest("pallas_dma_zeros")
    replayed = m["modules"][0]["replay"]
    assert (replayed["outcome"], replayed["inputs"]) == ("not replayable", "snapshot")
    assert replayed["evidence"] == UNCHECKED  # the replay ran on the chip, with no reference
    judged = _triage("pallas_dma_zeros")
    assert judged.xla
    assert "rests on the program's check alone" in judged.reason
    assert "pallas_call(..., interpret=True)" in judged.reason


def test_highest_precision_is_set_on_every_float_dot_of_a_recorded_module(tmp_path: Path) -> None:
    unpacked = _unpacked("bf16_train_step", tmp_path)
    text = next(unpacked.rglob("*jit_step*.before_optimizations.txt")).read_text("utf-8")
    assert precision.at_default(text) > 0
    highest = precision.at_highest(text)
    assert precision.at_default(highest) == 0
    assert highest.count("operand_precision={highest,highest}") == precision.at_default(text)


def test_bisect_of_a_tpu_bundle_off_a_tpu_says_it_needs_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if platforms.devices_here(platforms.TPU):
        pytest.skip("this machine has a TPU: bisect would search libtpu releases on it")
    out = tmp_path / "b.zip"
    code = main(["bisect", str(RECORDED / "readme_example.zip"), "-o", str(out)])
    assert code == ExitCode.UNVERIFIED
    said = capsys.readouterr().err
    assert "was compiled for a TPU: bisect needs a TPU" in said
    assert "each libtpu release on the chip" in said and "xla-bugkit bisect BUNDLE" in said
    assert not out.exists()


def test_a_search_among_pallas_modules_says_it_could_check_none() -> None:
    note = differential._fell_back(1, 1, "", unchecked=1)
    assert note.startswith("the 1 module with real inputs holds a Pallas kernel that runs only")
    mixed = differential._fell_back(3, 3, "", unchecked=1)
    assert "none of the 3 modules" in mixed and "(1 of them could not be checked" in mixed


def test_the_choices_note_that_nothing_checks_the_kernel_gives_way_to_its_interpret_mode(
    tmp_path: Path,
) -> None:
    """pallas_interpret.zip's notes still say, from the choice made before the run under the
    interpret mode, that no reference can check its kernel, beside the verdict that the
    interpret mode's outputs proved it wrong. The note, as the final verdicts leave it, is
    withdrawn: the bundle and the summary read from it say one thing."""
    m = _manifest("pallas_interpret")
    stale, *others = m["notes"]
    assert stale == differential._fell_back(1, 1, "", unchecked=1)  # what the search writes
    # What the search saw of the module (``pallas_dma_zeros``: the same program and module,
    # nothing to check it by), and what the replays after it said.
    searched = Verdict.from_json(_manifest("pallas_dma_zeros")["modules"][0]["replay"])
    proof = Verdict.from_json(m["modules"][0]["replay"])
    own = Verdict.from_json(_manifest("pallas_own_bug")["modules"][0]["replay"])
    assert searched.module == proof.module == own.module
    search = differential.Differential((), (searched,), candidates=1, note=stale)
    assert search.note_after([proof]) == ""  # proven by the interpret mode
    assert search.note_after([own]) == ""  # the kernel's own code, by the same mode
    assert search.note_after([searched]) == stale  # no run under the mode: it still holds
    index = dumps.index(_unpacked("pallas_interpret", tmp_path) / "modules")
    found = bundling._settled(Dumps(index, (stale, *others)), search, [proof])
    assert found.problems == tuple(others)
    kept = bundling._settled(Dumps(index, (stale, *others)), search, [searched])
    assert kept.problems == (stale, *others)


def test_a_pallas_wrong_value_is_not_run_again_for_later_inputs(tmp_path: Path) -> None:
    """No reference can check the kernel on any inputs: a second run would prove nothing."""
    m = _manifest("pallas_dma_zeros")
    failure = Failure.from_json(m["failure"])
    unchecked = Verdict.from_json(m["modules"][0]["replay"])
    run = SimpleNamespace(failure=failure)  # all a run is asked here
    result = CollectResult(
        ExitCode.NOT_REPRODUCED, run, Selection((), False), verdicts=(unchecked,)
    )  # type: ignore[arg-type]
    options = CollectOptions(output=tmp_path / "b.zip")
    assert not driver._needs_newest_inputs(result, options)
    checked = replace(unchecked, outcome=Outcome.NOT_REPRODUCED, evidence="ran to completion")
    assert driver._needs_newest_inputs(replace(result, verdicts=(checked,)), options)


def test_an_unproven_verdict_says_what_it_rests_on_and_gives_no_link(tmp_path: Path) -> None:
    """A Pallas kernel nothing off the chip checks points at XLA, but no replay outside the
    program reproduced its wrong value: no issue link, and what would prove it."""
    judged = _triage("pallas_dma_zeros")
    assert judged.unproven and not judged.proven
    lines = _summary._next_steps(tmp_path / "b.zip", "title", "jax-ml/jax", judged)
    assert lines[0].startswith("  unproven: the program's own check found a wrong")
    assert lines[1].startswith("  no issue link: no replay outside the program has shown")
    assert "To prove it: collect again" in lines[1]
    assert not any("issues/new" in line for line in lines)


def test_verify_on_a_tpu_says_a_pallas_kernel_ran_but_nothing_checks_it() -> None:
    """What verify prints on the chip, where the module runs but has no reference."""
    m = _manifest("pallas_dma_zeros")
    ran = Verdict.from_json(m["modules"][0]["replay"])
    check = ModuleCheck(m["modules"][0]["label"], ran, ran.outcome.value)
    result = VerifyResult(RECORDED / "pallas_dma_zeros.zip", Failure.from_json(m["failure"]),
                          (check,))  # fmt: skip
    said = render_table(result)
    assert "the module ran, but its Pallas kernel has no reference" in said
    assert "interpret=True" in said and "outside the reporter's program" not in said


def _against_interpret_mode(outcome: Outcome, evidence: str, **numbers: object) -> Verdict:
    """The recorded Pallas module's verdict, as the judge gives it where collect recorded the
    kernel's outputs under Pallas's interpret mode (``tests/replay/judge_interpret_test.py``)."""
    ran = Verdict.from_json(_manifest("pallas_dma_zeros")["modules"][0]["replay"])
    return replace(ran, outcome=outcome, evidence=evidence, numbers=numbers)


def test_a_compiled_kernel_that_differs_from_its_interpret_mode_is_said_so_in_every_view(
    tmp_path: Path,
) -> None:
    evidence = f"{COMPILED_DIFFERS}: 256/256 elements differ (max abs error 255)"
    proof = _against_interpret_mode(
        Outcome.REPRODUCED_WRONG, evidence, reference=INTERPRET_MODE, mismatches=256,
        elements=256,
    )  # fmt: skip
    failure = Failure.from_json(_manifest("pallas_dma_zeros")["failure"])
    judged = triage.triage(failure, [proof])
    assert judged.xla and judged.verdict == proof
    assert judged.reason == (
        "the replay of module_0000.jit_head.cl_933746096 on the TPU reproduces it (reproduced: "
        "wrong result: the compiled kernel differs from its interpret mode, recorded by "
        "collect running the program under that mode)"
    )
    assert wording.headline(judged, failure) == f"wrong result in jit(head): {evidence}"
    assert wording.title(judged, failure, "tpu") == (
        "XLA TPU wrong result in jit(head): 256 of 256 elements differ"
    )
    assert wording.sentence(judged, failure) == (
        "The TPU's compiled Pallas kernel in `jit(head)` computes a wrong result, with no "
        "error: 256 of 256 elements differ from the kernel's values under Pallas's interpret "
        "mode."
    )
    lines = _summary._next_steps(tmp_path / "b.zip", "title", "jax-ml/jax", judged)
    assert lines[0].startswith("  next: read ISSUE.md")  # proven: nothing unproven to say
    staged = report.Staged(None, None, replayed=True)
    assert report._replay_line(judged, [proof], staged) == (
        "Replaying `module_0000.jit_head.cl_933746096` from the bundle reproduces it without "
        "the original program, against the kernel's outputs under Pallas's interpret mode "
        "(`expected.npz`), which xla-bugkit recorded by running the program under that mode."
    )
    check = ModuleCheck("module_0000.jit_head.cl_933746096", proof, proof.outcome.value)
    result = VerifyResult(RECORDED / "pallas_dma_zeros.zip", failure, (check,))
    assert render_table(result).endswith("the recorded failure reproduces here")


def test_a_kernel_whose_interpret_mode_gives_the_same_values_is_not_called_an_xla_bug(
    tmp_path: Path,
) -> None:
    own = _against_interpret_mode(
        Outcome.NOT_REPRODUCED, f"ran to completion; {OWN_CODE_GIVES}",
        reference=INTERPRET_MODE, kernel=OWN_CODE,
    )  # fmt: skip
    failure = Failure.from_json(_manifest("pallas_dma_zeros")["failure"])
    judged = triage.triage(failure, [own])
    assert not judged.xla
    assert judged.reason.startswith(
        "the wrong value comes from the Pallas kernel's own code in jit(head): run under "
        "Pallas's TPU interpret mode"
    )
    assert judged.reason.endswith("not XLA or Mosaic")
    assert wording.title(judged, failure, "tpu") == (
        "first row wrong: 256 of 256 differ (no sign of an XLA bug)"
    )
    assert wording.sentence(judged, failure).startswith(
        "**This does not look like an XLA bug:** the wrong value comes from the Pallas "
        "kernel's own code"
    )
    lines = _summary._next_steps(tmp_path / "b.zip", "title", "jax-ml/jax", judged)
    assert lines[0].startswith("  this does not look like an XLA bug: the wrong value comes")
    assert lines[1].startswith("  no issue link: look into the program first")
    # No second run for later inputs: the kernel's code gives these values on any.
    run = SimpleNamespace(failure=failure)
    result = CollectResult(ExitCode.NOT_REPRODUCED, run, Selection((), False), verdicts=(own,))  # type: ignore[arg-type]
    assert not driver._needs_newest_inputs(result, CollectOptions(output=tmp_path / "b.zip"))


def test_a_kernel_the_interpret_mode_cannot_run_is_said_so_plainly(tmp_path: Path) -> None:
    error = "NotImplementedError: interpret mode does not support this DMA"
    unchecked = _against_interpret_mode(
        Outcome.NOT_REPLAYABLE, f"{UNCHECKED}; {CANNOT_INTERPRET}: {error}"
    )
    failure = Failure.from_json(_manifest("pallas_dma_zeros")["failure"])
    judged = triage.triage(failure, [unchecked])
    assert judged.xla  # unproven, neither way: the program's check stands
    assert f"Pallas's interpret mode cannot run the kernel ({error})" in judged.reason
    assert "rests on the program's check alone" in judged.reason
    assert "interpret=True" not in judged.reason  # collect ran it already
    check = ModuleCheck("module_0000.jit_head.cl_933746096", unchecked, unchecked.outcome.value)
    said = render_table(VerifyResult(RECORDED / "pallas_dma_zeros.zip", failure, (check,)))
    assert f"Pallas's interpret mode cannot run the kernel ({error})" in said
    assert "interpret=True" not in said
