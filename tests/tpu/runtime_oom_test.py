"""Out of the accelerator's memory at run time, beside the program's own live arrays: not an
XLA bug. The run recorded on a TPU v5e chip (``recorded/hbm_runtime_oom.zip``: three 4 GiB
arrays alive, then a 4 GiB result) and the allocator's words as printed elsewhere
(``recorded/oom_wordings/``, whose README says where each was printed)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from xla_bugkit.bundle import excused, triage
from xla_bugkit.choose import allocation
from xla_bugkit.cli.commands import _summary
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.verdict import Outcome, Verdict

RECORDED = Path(__file__).parent / "recorded"
WORDINGS = RECORDED / "oom_wordings"
BUNDLE = RECORDED / "hbm_runtime_oom.zip"
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 23, in <module>\n'


def _recorded() -> tuple[Failure, list[Verdict], str]:
    with zipfile.ZipFile(BUNDLE) as z:
        manifest = json.loads(z.read("manifest.json"))
        log = z.read("log.txt").decode()
    verdicts = [Verdict.from_json(m["replay"]) for m in manifest["modules"]]
    return Failure.from_json(manifest["failure"]), verdicts, log


def _failure_of(name: str) -> tuple[Failure, str]:
    output = TRACEBACK + (WORDINGS / name).read_text("utf-8")
    return classify(output, exit_status=1, timed_out=False, interrupted=False), output


def test_the_chips_run_time_shortfall_is_not_called_an_xla_bug() -> None:
    failure, verdicts, log = _recorded()
    assert failure.kind is Kind.RUNTIME_ERROR
    assert failure.headline == "RESOURCE_EXHAUSTED: E0100: RuntimeBufferAllocationFailure:"
    (ran,) = verdicts
    assert ran.outcome is Outcome.NOT_REPRODUCED  # on a chip holding nothing else
    judged = triage.triage(failure, verdicts, output=log)
    assert not judged.xla
    assert judged.reason.startswith(
        "the accelerator had 3.75G free when the module asked for 4.00G as it started to run: "
        "the rest of the chip's memory (HBM) was held by arrays still alive, most likely the "
        "program's own; the module alone fits the chip: its replay "
        "(module_0012.jit_expand_queries.cl_933746096), on a chip holding nothing else, ran "
        "to completion."
    )
    for remedy in ("jax.live_arrays()", "donate_argnums", "jax.clear_caches()", "smaller batch"):
        assert remedy in judged.reason


def test_before_the_allocators_words_were_read_the_same_run_was_filed_as_xlas() -> None:
    """The headline alone is JAX's error code: what collect said of this run on the chip."""
    failure, verdicts, _ = _recorded()
    assert triage.triage(failure, verdicts).xla


def test_no_issue_link_is_offered_for_it(tmp_path: Path) -> None:
    failure, verdicts, log = _recorded()
    judged = triage.triage(failure, verdicts, output=log)
    lines = _summary._next_steps(tmp_path / "b.zip", "title", "jax-ml/jax", judged)
    assert lines[0].startswith("  this does not look like an XLA bug: the accelerator had 3.75G")
    assert lines[1].startswith("  no issue link")
    assert not any("github.com" in line for line in lines)


def test_a_replay_that_ran_out_too_leaves_it_to_the_replay() -> None:
    """On a chip of its own the module alone does not fit, though its compile said it would."""
    failure, verdicts, log = _recorded()
    short = replace(verdicts[0], outcome=Outcome.REPRODUCED_ERROR, evidence=failure.headline)
    assert excused.reason(failure, replayed=[short], output=log) is None
    judged = triage.triage(failure, [short], output=log)
    assert judged.xla and judged.verdict == short


def test_without_a_replay_it_rests_on_the_compilers_acceptance() -> None:
    failure, _, log = _recorded()
    said = excused.reason(failure, output=log)
    assert said is not None
    assert "the compiler had accepted the module for this chip" in said


def test_the_largest_buffers_of_the_modules_own_report_are_named(tmp_path: Path) -> None:
    failure, verdicts, log = _recorded()
    with zipfile.ZipFile(BUNDLE) as z:
        name = next(n for n in z.namelist() if n.endswith("-memory-usage-report.txt"))
        report = z.read(name).decode()
    largest = allocation.largest_allocations(report, 1)
    assert largest == ["4.00GiB: f32[1048576,1024]"]
    said = excused.reason(failure, replayed=verdicts, output=log, largest_buffers=largest)
    assert said is not None and "(its memory-usage report, largest: 4.00GiB: f32[" in said


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("tpu_jax_exception.txt", ("4.00G", "3.75G")),
        ("tpu_prefix_same_line.txt", ("50.00M", "27.86M")),
        ("tpu_program_load.txt", ("29.49G", "147.64M")),
        ("tpu_wrapped.txt", ("3.98G", "3.97G")),
    ],
)
def test_each_wording_of_the_tpu_allocator_is_a_shortfall(
    name: str, sizes: tuple[str, str]
) -> None:
    failure, output = _failure_of(name)
    assert failure.kind is Kind.RUNTIME_ERROR
    assert excused.run_time_shortfall(failure, output) == sizes
    said = excused.reason(failure, output=output)
    assert said is not None and said.startswith(f"the accelerator had {sizes[1]} free")


@pytest.mark.parametrize("name", ["tpu_runtime_line.txt", "tpu_bare_sentence.txt"])
def test_the_allocators_line_alone_is_read_without_its_prefix_or_suffix(name: str) -> None:
    text = (WORDINGS / name).read_text("utf-8")
    assert allocation.short_at_run_time(text) == ("4.00G", "3.75G")
    # Printed alone it is no XLA status: nothing to excuse.
    failure, output = _failure_of(name)
    assert excused.run_time_shortfall(failure, output) is None


def test_the_same_words_for_a_kernels_scoped_vmem_are_not_excused() -> None:
    failure, output = _failure_of("tpu_scoped_vmem.txt")
    assert failure.kind is Kind.RUNTIME_ERROR
    assert excused.run_time_shortfall(failure, output) is None
    assert excused.reason(failure, output=output) is None


def test_a_pallas_kernels_block_over_the_chips_vmem_is_the_programs_own() -> None:
    """The window of one operand a Pallas kernel's BlockSpec asks for, over the v5e's 128 MiB
    of VMEM at compile: its replay fails the same way, and only the program's block sizes
    change that. Without a window the same allocator's words stay XLA's (above)."""
    output = TRACEBACK + (WORDINGS / "tpu_pallas_vmem_window.txt").read_text("utf-8")
    failure = classify(output, exit_status=1, phase=Phase.COMPILE)
    assert failure.kind is Kind.COMPILE_ERROR and failure.status_code == "RESOURCE_EXHAUSTED"
    proof = Verdict("module_0007.jit_matmul.cl_933746096", Outcome.REPRODUCED_ERROR,
                    failure.headline, "generated (seed 42)", failure)  # fmt: skip
    judged = triage.triage(failure, [proof])
    assert not judged.xla and judged.whose == "not xla"
    assert judged.reason.startswith(
        "the program's own kernel asks for a VMEM window larger than the chip has: one block "
        "of its input 0 (f32[4096,8192] of f32[8192,8192], 2 buffers deep) needs 268,435,456 "
        "bytes of the 134,217,728 there are"
    )


def test_the_gpus_bfc_out_of_memory_is_not_excused() -> None:
    """XLA's BFC allocator on a GPU says what it was asked, not what was free nor whose arrays
    held the rest; it says the same when the module alone exceeds the card."""
    failure, output = _failure_of("gpu_bfc.txt")
    assert failure.kind is Kind.RUNTIME_ERROR
    assert allocation.short_at_run_time(output) is None
    assert excused.reason(failure, output=output) is None


def test_a_compile_error_in_the_same_words_is_not_a_run_time_shortfall() -> None:
    failure, output = _failure_of("tpu_prefix_same_line.txt")
    compiling = replace(failure, kind=Kind.COMPILE_ERROR)
    assert excused.run_time_shortfall(compiling, output) is None


def test_a_compiles_out_of_hbm_is_replayed_in_the_program_one_at_run_time_is_not() -> None:
    """The program's own process may replay a module whose compile ran out of the chip's
    memory (the compiler weighs it against the whole chip, not what the program left free),
    never one whose run did (its arrays still hold the chip): the recorded runs of both."""
    from xla_bugkit.collecting import ahead

    with zipfile.ZipFile(RECORDED / "hbm_oom.zip") as z:
        compiling = Failure.from_json(json.loads(z.read("manifest.json"))["failure"])
    running, _, _ = _recorded()
    assert compiling.kind is Kind.COMPILE_ERROR and "exceeds available HBM" in compiling.headline
    assert ahead._servable_failure(compiling)
    assert running.kind is Kind.RUNTIME_ERROR
    assert not ahead._servable_failure(running)
