"""The run's own TPU compiler flags as a cause (``collecting.own_flags.probe_tpu``): the
failing module replayed without its LIBTPU_INIT_ARGS, and a compile past a limit one of them
set is the user's, not XLA's. ``recorded/tpu_flag_vmem.zip`` was collected on a TPU v5e chip:
its Pallas kernel needs 8 MiB of scoped VMEM and the run set
``--xla_tpu_scoped_vmem_limit_kib=4096``; bare, the program runs (benchmarks/TPU.md). The
replay without the flags needs the chip: here it is stood in for by its verdict."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers.programs import run_record
from xla_bugkit.bundle import excused, triage
from xla_bugkit.bundle.own_flags import OwnFlags
from xla_bugkit.choose.selection import Selection
from xla_bugkit.cli.commands import _summary
from xla_bugkit.collecting import own_flags
from xla_bugkit.collecting.replays import Replaying, Replays
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import ReplayInput, RunContext
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.run.record import RunRecord
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict

BUNDLE = Path(__file__).parent / "recorded" / "tpu_flag_vmem.zip"
WORDINGS = Path(__file__).parent / "recorded" / "oom_wordings"
FLAG = "--xla_tpu_scoped_vmem_limit_kib=4096"
DUMP = "--xla_mosaic_dump_to=/tmp/tpu-visit/own-mosaic"
NAMED = f"this run set its own TPU compiler flags (LIBTPU_INIT_ARGS {FLAG})"
LIMIT = (
    f"the run's own TPU flag (LIBTPU_INIT_ARGS {FLAG}) set the limit the module exceeds: "
    "without it it compiles and runs. Raise that limit or drop the flag (the compiler's "
    "default limit fits this module)"
)


def _recorded() -> tuple[Failure, list[Verdict], str]:
    with zipfile.ZipFile(BUNDLE) as z:
        manifest = json.loads(z.read("manifest.json"))
        log = z.read("log.txt").decode()
    verdicts = [Verdict.from_json(m["replay"]) for m in manifest["modules"]]
    return Failure.from_json(manifest["failure"]), verdicts, log


def _ran(module: str) -> Verdict:
    return Verdict(module, Outcome.NOT_REPRODUCED, "ran to completion", "generated (seed 42)")


def _compile_error(headline: str, status: str | None = None) -> Failure:
    return Failure(Kind.COMPILE_ERROR, Phase.COMPILE, headline, headline, status_code=status)


def test_the_recorded_failure_is_a_compile_past_a_limit() -> None:
    failure, (proof,), log = _recorded()
    assert failure.kind is Kind.COMPILE_ERROR
    assert failure.headline == "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:"
    assert proof.outcome is Outcome.REPRODUCED_ERROR
    assert "Scoped allocation with size 8.00M and limit 4.00M" in log
    assert excused.over_compile_limit(failure)


def test_a_limit_the_runs_own_tpu_flag_set_is_not_called_an_xla_bug() -> None:
    failure, verdicts, log = _recorded()
    own = OwnFlags(
        (FLAG,), _ran(verdicts[0].module), tpu=True, over_limit=excused.over_compile_limit(failure)
    )
    assert own.limiting == (FLAG,)
    assert own.finding() == (
        f"{NAMED}; without them the module compiles and runs: raise the limit they set or "
        "drop them (the compile ran past it)"
    )
    judged = triage.triage(failure, verdicts, limited_by=own.limiting, output=log)
    assert not judged.xla
    assert judged.reason == LIMIT
    assert judged.verdict == verdicts[0]  # the replay still reproduced it under the flag


def test_before_the_replay_without_them_the_same_run_was_filed_as_xlas() -> None:
    """What collect said of this run on the chip: reproduced, XLA's compile error."""
    failure, verdicts, log = _recorded()
    assert triage.triage(failure, verdicts, output=log).xla


def test_no_issue_link_is_offered_and_the_remedy_is_said(tmp_path: Path) -> None:
    failure, verdicts, _ = _recorded()
    judged = triage.triage(failure, verdicts, limited_by=(FLAG,))
    lines = _summary._next_steps(tmp_path / "b.zip", "title", "openxla/xla", judged)
    assert lines[0] == f"  this does not look like an XLA bug: {LIMIT}"
    assert lines[1].startswith("  no issue link")
    assert not any("github.com" in line for line in lines)


def test_several_flags_are_named_together() -> None:
    failure, verdicts, _ = _recorded()
    two = (FLAG, "--xla_tpu_enable_latency_hiding_scheduler=false")
    reason = triage.triage(failure, verdicts, limited_by=two).reason
    assert reason.startswith(f"the run's own TPU flags (LIBTPU_INIT_ARGS {' '.join(two)}) set")
    assert "without them it compiles and runs. Raise that limit or drop the flags" in reason


@pytest.mark.parametrize(
    "headline",
    [
        "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:",  # the recorded run's, JAX's
        # The chip's next lines (log.txt), and another run's (oom_wordings/tpu_scoped_vmem.txt),
        # where a wrapper left no status code.
        "Scoped allocation with size 8.00M and limit 4.00M exceeded scoped vmem limit by 4.00M.",
        *(WORDINGS / "tpu_scoped_vmem.txt").read_text("utf-8").splitlines()[1:],
    ],
)
def test_each_wording_of_a_compile_past_its_limit_is_one(headline: str) -> None:
    assert excused.over_compile_limit(_compile_error(headline))
    said = excused.reason(_compile_error(headline), limited_by=(FLAG,))
    assert said == LIMIT


def test_a_status_code_alone_says_it() -> None:
    assert excused.over_compile_limit(_compile_error("E1001: scoped", "RESOURCE_EXHAUSTED"))


@pytest.mark.parametrize(
    "failure",
    [
        _compile_error("INTERNAL: Mosaic failed to compile TPU kernel: unsupported layout"),
        Failure(Kind.COMPILE_CRASH, Phase.COMPILE, "Check failed: ok", "Check failed: ok"),
    ],
)
def test_another_failure_that_needs_the_flags_stays_xlas(failure: Failure) -> None:
    """A crash or an error is XLA's bug under any flags: the first line says they matter."""
    proof = Verdict("module_0007.jit_normalize", Outcome.REPRODUCED_ERROR, "error", "x")
    own = OwnFlags(
        (FLAG,), _ran(proof.module), tpu=True, over_limit=excused.over_compile_limit(failure)
    )
    assert own.limiting == ()
    assert own.finding() == (
        f"{NAMED}; without them the module compiles and runs: say so in the report (a crash "
        "or an error is XLA's bug under any flags)"
    )
    judged = triage.triage(failure, [proof], limited_by=own.limiting)
    assert judged.xla
    # Were it handed the flags anyway, only a compile past a limit is excused.
    assert triage.triage(failure, [proof], limited_by=(FLAG,)).xla


def test_a_limit_still_exceeded_or_failing_otherwise_without_them_is_no_excuse() -> None:
    failure, (proof,), _ = _recorded()
    over = excused.over_compile_limit(failure)
    assert OwnFlags((FLAG,), proof, tpu=True, over_limit=over).limiting == ()
    assert OwnFlags((FLAG,), proof, tpu=True, over_limit=over).finding() == (
        f"{NAMED}; it fails without them too"
    )
    otherwise = replace(_ran(proof.module), failure=_compile_error("INTERNAL: other"))
    assert OwnFlags((FLAG,), otherwise, tpu=True, over_limit=over).limiting == ()
    # The XLA flags' record never excuses a limit: they are not the TPU compiler's.
    assert OwnFlags((FLAG,), _ran(proof.module), over_limit=over).limiting == ()


class _Probed:
    """``probe_tpu`` on the recorded module without a chip: ``_failing`` gives the module
    and its input on ``platform``, ``replay`` stands in for the chip and keeps what it got."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, platform: str, outcome: Outcome) -> None:
        failure, (proof,), log = _recorded()
        self.proof, self.failure, self.log = proof, failure, log
        self.replayed: list[ReplayInput] = []
        module = SimpleNamespace(label=proof.module, name="jit_normalize")
        inp = ReplayInput("jit_normalize", Path("module.hlo.pb"), platform=platform)
        failing = own_flags._Failing(module, inp, proof)  # type: ignore[arg-type]
        monkeypatch.setattr(own_flags, "_failing", lambda *_: failing)
        monkeypatch.setattr(own_flags, "replay", self._replay)
        self.outcome = outcome

    def _replay(self, inp: ReplayInput, **_: Any) -> Verdict:
        self.replayed.append(inp)
        if self.outcome is Outcome.NOT_REPRODUCED:
            return _ran(self.proof.module)
        return self.proof

    def weigh(self, tpu_args: tuple[str, ...], **fields: Any) -> RunRecord:
        run = run_record(self.log, self.failure, tpu_args=tpu_args, **fields)
        context = RunContext(tpu_args=run.tpu_args_in_force)
        replaying = Replaying(context, ReplayOptions(timeout=600))
        selection = Selection((), guess=False)
        verdicts = Replays((self.proof,))
        return own_flags.weigh(Path("dumps"), selection, run, verdicts, replaying, ui=Ui(-1))


def test_collect_replays_a_tpu_module_without_them_and_records_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probed = _Probed(monkeypatch, "tpu", Outcome.NOT_REPRODUCED)
    run = probed.weigh((FLAG, DUMP))
    (without,) = probed.replayed
    assert without.tpu_args == ()  # none at all: the compiler's defaults, not the machine's
    assert run.own_flags == (
        f"{NAMED}; without them the module compiles and runs: raise the limit they set or "
        "drop them (the compile ran past it)"
    )
    assert run.limited_by == (FLAG,)  # the dump flag was never applied, so never named
    judged = triage.of_run(run, [probed.proof])
    assert not judged.xla and judged.reason == LIMIT


def test_a_module_that_still_fails_without_them_keeps_its_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probed = _Probed(monkeypatch, "tpu", Outcome.REPRODUCED_ERROR)
    run = probed.weigh((FLAG,))
    assert run.own_flags == f"{NAMED}; it fails without them too"
    assert run.limited_by == ()
    assert triage.of_run(run, [probed.proof]).xla


@pytest.mark.parametrize(
    ("platform", "tpu_args"), [("tpu", ()), ("tpu", (DUMP,)), ("cpu", (FLAG,))]
)
def test_without_tpu_flags_or_off_a_tpu_nothing_is_replayed_nor_said(
    monkeypatch: pytest.MonkeyPatch, platform: str, tpu_args: tuple[str, ...]
) -> None:
    probed = _Probed(monkeypatch, platform, Outcome.NOT_REPRODUCED)
    run = probed.weigh(tpu_args)
    assert probed.replayed == []
    assert run.own_flags is None and run.limited_by == ()
    assert triage.of_run(run, [probed.proof]).xla
