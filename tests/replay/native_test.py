"""Which replay judges a module: under the framework's own XLA first (torch_xla for
PyTorch/XLA, where it is installed), with the jaxlib replay as the second opinion that
decides where the issue goes; under jaxlib alone otherwise, saying so.

These need no torch. The end-to-end proof that torch_xla's own replay reproduces a crash
jaxlib's does not is tests/frameworks/ptxla_test.py (``-m frontends``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from xla_bugkit import jaxlib_adapter
from xla_bugkit.cli.commands.verify import render_table
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.frameworks import Framework
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.hlo.generated import generated
from xla_bugkit.replay import judge, native
from xla_bugkit.replay.child import native_worker
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.verdict import Outcome, Verdict
from xla_bugkit.verify import ModuleCheck, VerifyResult

NO_TORCH_XLA = importlib.util.find_spec("torch_xla") is None
CRASH = Failure(
    Kind.COMPILE_CRASH, Phase.COMPILE, "ir_array.cc:515] Check failed: x", "ir_array.cc:515] "
    "Check failed: x", -6, "SIGABRT", site="ir_array.cc:515",
)  # fmt: skip
OWN = "torch_xla 2.9.0's own XLA"


def _verdict(outcome: Outcome, under: str = "", second: Verdict | None = None) -> Verdict:
    failure = CRASH if outcome is Outcome.REPRODUCED_CRASH else None
    return Verdict("module_0004.SyncTensorsGraph.11", outcome, "evidence", "generated (seed 42)",
                   failure, under=under, second=second)  # fmt: skip


NATIVE_ONLY = _verdict(
    Outcome.REPRODUCED_CRASH, OWN, _verdict(Outcome.NOT_REPRODUCED, "jaxlib 0.10.2")
)


def test_a_verdict_keeps_its_xla_and_second_opinion_through_json() -> None:
    assert Verdict.from_json(NATIVE_ONLY.to_json()) == NATIVE_ONLY
    # Bundles made before the native replay have neither field.
    old = {k: v for k, v in _verdict(Outcome.NOT_REPRODUCED).to_json().items()
           if k not in ("under", "second")}  # fmt: skip
    assert Verdict.from_json(old) == _verdict(Outcome.NOT_REPRODUCED)


@pytest.mark.parametrize(
    ("verdict", "under_jaxlib"),
    [
        # torch_xla's replay crashed, jaxlib's ran: the bug stays PyTorch/XLA's to triage.
        (NATIVE_ONLY, False),
        (_verdict(Outcome.NOT_REPRODUCED, OWN, _verdict(Outcome.REPRODUCED_CRASH, "jaxlib")),
         True),
        # A jaxlib replay of its own (torch_xla missing, or an older bundle).
        (_verdict(Outcome.REPRODUCED_CRASH, "jaxlib 0.10.2"), True),
        (_verdict(Outcome.REPRODUCED_CRASH), True),
        # A native replay without its second opinion says nothing about jaxlib.
        (_verdict(Outcome.REPRODUCED_CRASH, OWN), False),
    ],
)  # fmt: skip
def test_only_the_jaxlib_replay_sends_the_issue_to_openxla(
    verdict: Verdict, under_jaxlib: bool
) -> None:
    assert native.reproduced_under_jaxlib([verdict]) is under_jaxlib


def test_the_label_names_both_xlas_when_the_native_replay_ran() -> None:
    assert native.replay_label([NATIVE_ONLY]) == (
        f"under {OWN}, the XLA that failed (and under jaxlib 0.10.2: not reproduced)"
    )
    assert native.replay_label([_verdict(Outcome.REPRODUCED_CRASH, "jaxlib 0.10.2")]) is None


@pytest.mark.parametrize("framework", [None, Framework.JAX, Framework.TENSORFLOW])
def test_only_pytorch_xla_has_a_native_replay(framework: Framework | None) -> None:
    assert native.native_label(framework) is None
    assert native.fallback_note(framework) is None


@pytest.mark.skipif(not NO_TORCH_XLA, reason="torch_xla is installed here")
def test_without_torch_xla_the_replay_falls_back_to_jaxlib_and_says_so() -> None:
    assert native.native_label(Framework.PYTORCH_XLA) is None
    assert native.fallback_note(Framework.PYTORCH_XLA) == (
        f"torch_xla is not installed here: the modules are replayed under "
        f"{native.jaxlib_label()} only, not under PyTorch/XLA's own XLA (the XLA that failed)"
    )


class _Calls:
    """Stand-ins for the two replay children: the real ones need torch_xla (absent here)
    and take seconds; what is under test is which runs, in what order, and what is kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, torch_xla: str | None) -> None:
        self.order: list[str] = []
        monkeypatch.setattr(native._torch_xla, "version", lambda: torch_xla)
        monkeypatch.setattr(native, "replay_native", self._native)
        monkeypatch.setattr(judge, "replay", self._jaxlib)

    def _native(self, inp: ReplayInput, **_: object) -> Verdict:
        self.order.append("native")
        return _verdict(Outcome.REPRODUCED_CRASH)

    def _jaxlib(self, inp: ReplayInput, *, options: ReplayOptions, **_: object) -> Verdict:
        self.order.append("jaxlib")
        assert options.keep_arrays == Path("kept")  # repro.py runs under jaxlib
        return _verdict(Outcome.NOT_REPRODUCED)


def _replay(framework: Framework | None) -> Verdict:
    inp = ReplayInput("module_0004.SyncTensorsGraph.11", Path("m.hlo.pb"))
    return native.replay(
        inp, framework=framework, expected=CRASH, options=ReplayOptions(keep_arrays=Path("kept"))
    )


def test_pytorch_xla_replays_under_torch_xla_first_with_jaxlib_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _Calls(monkeypatch, torch_xla="2.9.0")
    verdict = _replay(Framework.PYTORCH_XLA)
    assert calls.order == ["native", "jaxlib"]
    assert (verdict.outcome, verdict.under) == (Outcome.REPRODUCED_CRASH, OWN)
    assert verdict.second is not None
    assert verdict.second.under == native.jaxlib_label()
    assert verdict.second.outcome is Outcome.NOT_REPRODUCED


def test_without_torch_xla_pytorch_xla_replays_under_jaxlib_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _Calls(monkeypatch, torch_xla=None)
    verdict = _replay(Framework.PYTORCH_XLA)
    assert calls.order == ["jaxlib"]
    assert (verdict.under, verdict.second) == (native.jaxlib_label(), None)
    assert native.fallback_note(Framework.PYTORCH_XLA) is not None


@pytest.mark.parametrize("framework", [None, Framework.JAX])
def test_jax_modules_replay_under_jaxlib_as_before(
    monkeypatch: pytest.MonkeyPatch, framework: Framework | None
) -> None:
    calls = _Calls(monkeypatch, torch_xla="2.9.0")
    assert _replay(framework) == _verdict(Outcome.NOT_REPRODUCED)
    assert calls.order == ["jaxlib"]


def test_the_verify_table_says_which_xla_each_replay_ran_under() -> None:
    check = ModuleCheck(NATIVE_ONLY.module, NATIVE_ONLY, "reproduced: crash")
    table = render_table(VerifyResult(Path("b.zip"), CRASH, (check,)))
    said = f"{NATIVE_ONLY.module}: reproduced: crash under {OWN} (as in the reporter's replay)"
    assert said in table
    assert "    second opinion under jaxlib 0.10.2: not reproduced: evidence" in table


def test_the_native_child_generates_the_inputs_the_jaxlib_child_does() -> None:
    text = (
        "HloModule m, entry_computation_layout={(f32[2,3]{1,0}, s32[4]{0}, pred[], f16[2]{0})"
        "->f32[2,3]{1,0}}\n\nENTRY e {\n  a = f32[2,3]{1,0} parameter(0)\n"
        "  b = s32[4]{0} parameter(1)\n  c = pred[] parameter(2)\n  d = f16[2]{0} parameter(3)\n"
        "  ROOT r = f32[2,3]{1,0} negate(a)\n}\n"
    )
    module = jaxlib_adapter.hlo_text_to_module_bytes(text)
    proto = hlo_proto.HloProto()
    proto.hlo_module.ParseFromString(module)
    types = native_worker.parameter_types(proto)
    assert [(t.name, dims) for t, dims in types] == [
        ("float32", (2, 3)), ("int32", (4,)), ("bool", ()), ("float16", (2,))
    ]  # fmt: skip
    # Both children draw from these types with the one generator: the same types, the same
    # values.
    jaxlibs = jaxlib_adapter.parameter_types(module)
    assert [(t, tuple(d)) for t, d in types] == [(t, tuple(d)) for t, d in jaxlibs]
    for ours, theirs in zip(generated(types, 42),
                            generated(jaxlibs, 42),
                            strict=True):  # fmt: skip
        np.testing.assert_array_equal(ours, theirs)
        assert ours.dtype == theirs.dtype


def test_a_bundle_no_module_of_which_could_run_is_unverified_not_unreproduced() -> None:
    refused = Verdict(
        "module_0046.jit_newton",
        Outcome.NOT_REPLAYABLE,
        "the module calls back into Python (custom-call xla_ffi_python_cpu_callback)",
        "",
    )
    result = VerifyResult(Path("b.zip"), CRASH, (ModuleCheck(refused.module, refused, None),))
    assert result.unreplayable and result.unverified and not result.reproduced
    table = render_table(result)
    assert "does NOT reproduce" not in table
    assert "inputs: ;" not in table  # refused before it read any
    assert table.endswith(
        "the recorded failure is unverified here: no module of the bundle can be replayed "
        "outside the reporter's program (see above); it takes that program to check it"
    )
    ran = ModuleCheck("module_0047.jit_g", _verdict(Outcome.NOT_REPRODUCED), None)
    assert not VerifyResult(Path("b.zip"), CRASH, (ModuleCheck(refused.module, refused, None),
                                                   ran)).unverified  # fmt: skip


def test_the_table_says_what_the_reporters_replay_made_of_a_programs_own_check() -> None:
    alert = Failure(Kind.EXIT, Phase.UNKNOWN, "ALERT: scores disagree", "ALERT: scores disagree", 3)
    wrong = Verdict("module_0006.jit_scores", Outcome.REPRODUCED_WRONG, "1 of 9 differ", "snapshot")
    check = ModuleCheck(wrong.module, wrong, "reproduced: wrong result")
    table = render_table(VerifyResult(Path("b.zip"), alert, (check,)))
    assert table.startswith(
        "recorded failure: non-XLA failure: ALERT: scores disagree\n"
        "the reporter's replay of module_0006.jit_scores: reproduced: wrong result\n"
    )
    assert "the reporter's replay" not in render_table(VerifyResult(Path("b.zip"), CRASH, ()))
