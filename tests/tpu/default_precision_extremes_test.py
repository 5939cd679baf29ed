"""The wrong-result search's extreme inputs on a TPU module at the default precision, as
recorded on a TPU v5e chip (jax and jaxlib 0.10.2): tests/programs/tpu_default_matmul.py,
a float32 ``x @ w`` checked by np.testing against float64 at 1e-5, under
``collect --no-data`` (generated inputs, then the extreme sets).

Three runs of the same program: before (``default_matmul_before``: the ``max`` set "showed"
a wrong result, every output NaN where the reference has a number), with only values beyond
bfloat16's range ruled out (``default_matmul_max_only``: the ``huge`` set, whose products
overflow float32, "showed" one next), and now (``default_matmul``: no wrong result, the
default precision named, each set listed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xla_bugkit.bundle import triage
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import extreme
from xla_bugkit.verdict import Outcome, Verdict

RECORDED = Path(__file__).parent / "recorded"


def _verdict(name: str) -> tuple[Failure, Verdict]:
    m = json.loads((RECORDED / f"{name}.manifest.json").read_text("utf-8"))
    (module,) = m["modules"]
    return Failure.from_json(m["failure"]), Verdict.from_json(module["replay"])


@pytest.mark.parametrize("name", ["default_matmul_before", "default_matmul_max_only"])
def test_each_set_that_fooled_the_search_on_the_chip_is_one_it_now_rules_out(name: str) -> None:
    _, verdict = _verdict(name)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG  # what the chip made of it then
    assert "NaN where the reference has a number" in verdict.evidence
    used = verdict.inputs.removeprefix(f"{extreme.LABEL}: ").split(" ")[0]
    assert used in extreme.SETS
    assert extreme.out_of_range(used) is not None


def test_now_the_chip_finds_no_wrong_result_and_names_the_default_precision() -> None:
    failure, verdict = _verdict("default_matmul")
    assert verdict.outcome is Outcome.NOT_REPRODUCED
    assert verdict.numbers["precision"] == "default"
    ruled_out = f"({extreme.OUT_OF_RANGE}: proves nothing)"
    assert f"max {ruled_out}, huge {ruled_out}, tiny)" in verdict.evidence
    judged = triage.triage(failure, [verdict])
    assert not judged.xla
    assert "runs its float32 matmuls at the TPU's default precision" in judged.reason
