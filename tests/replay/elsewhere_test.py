"""What a machine without the module's platform says of it: the pieces, on their own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import elsewhere
from xla_bugkit.verdict import Outcome, Verdict

INSTALL = "pip install xla-bugkit==0.1.0"


def test_the_command_pins_jax_only_to_a_version_number() -> None:
    ok = elsewhere.command("bug.zip", "gpu", {"jax": "0.10.2"}, INSTALL)
    assert ok == (
        "pip install 'jax[cuda12]==0.10.2' && pip install xla-bugkit==0.1.0 && "
        "xla-bugkit verify bug.zip"
    )
    # A bundle is a stranger's: its version text goes nowhere near a shell unless a number.
    hostile = elsewhere.command("bug.zip", "gpu", {"jax": "0.10.2'; rm -rf ~; '"}, INSTALL)
    assert "rm -rf" not in hostile and "jax[cuda12]'" in hostile
    assert "jax[cuda13]" in elsewhere.command("b.7z", "gpu", {"jax-cuda13-plugin": "1"}, INSTALL)
    assert "jax[tpu]" in elsewhere.command("b.7z", "tpu", {}, INSTALL)
    assert elsewhere.command("my bug.zip", "gpu", {}, INSTALL).endswith("verify 'my bug.zip'")


def test_what_the_module_needs_is_named_as_people_name_it() -> None:
    assert elsewhere.needs("gpu", {"jax-cuda12-plugin": "0.10.2"}) == "CUDA"
    assert elsewhere.needs("gpu", {"jax-rocm7-plugin": "0.10.2"}) == "ROCm"
    assert elsewhere.needs("tpu", {}) == "a TPU"


def _verdict(outcome: Outcome, failure: Failure | None = None) -> Verdict:
    return Verdict("m", outcome, "the evidence", "generated (seed 42)", failure=failure)


@pytest.mark.parametrize(
    ("verdict", "line"),
    [
        (_verdict(Outcome.REPRODUCED_CRASH), "also fails on the CPU, the same way"),
        (_verdict(Outcome.NOT_REPLAYABLE), "not run on the CPU"),
        (
            _verdict(Outcome.NOT_REPRODUCED, Failure(Kind.RUNTIME_ERROR, Phase.RUN, "x", "x")),
            "fails differently on the CPU",
        ),
        (_verdict(Outcome.NOT_REPRODUCED), "the CPU runs it correctly"),
        (
            replace(_verdict(Outcome.REPRODUCED_HANG), numbers={"busy": 0.9}),
            "on the CPU too it computes past its bound",
        ),
    ],
)
def test_the_cpu_run_says_what_it_shows(verdict: Verdict, line: str) -> None:
    assert elsewhere.cpu_line(verdict, "gpu").startswith(line)


def test_a_platform_is_absent_when_no_plugin_could_give_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(elsewhere, "_installed", lambda dist: False)
    assert elsewhere.absent_here("gpu") and elsewhere.absent_here("tpu")
    assert not elsewhere.absent_here("cpu")
    monkeypatch.setattr(elsewhere, "_installed", lambda dist: dist == "jax-cuda12-plugin")
    assert not elsewhere.absent_here("gpu")


def test_a_child_without_the_platform_is_told_apart() -> None:
    missing = Verdict("m", Outcome.NOT_REPLAYABLE, "platform 'gpu' is not available here", "")
    assert elsewhere.missing_platform(missing)
    assert not elsewhere.missing_platform(_verdict(Outcome.NOT_REPLAYABLE))
