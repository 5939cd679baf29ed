"""A sum whose order decides whether it overflows is no wrong result: a real module replayed.

jit_total of tests/programs/wrong_then_lost_peer.py is ``jnp.sum`` of float64 energies
sharded over 6 CPU devices. On the ``max`` extreme set (+max, -max, ... of float64) the
partitioned module adds terms of one sign first and ends in NaN, and the op-by-op reference,
compiled under the conservative flags on one device, added them in turn and gave 0: that
was once called XLA's wrong result. XLA leaves a reduction's order open; the reference has
no value there, and the verdict says why.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.dumps import DUMP_FLAGS, Dumped
from xla_bugkit import proc
from xla_bugkit.failure.classify import Kind, Phase, classify
from xla_bugkit.replay import protocol
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.judge_result import judge_result
from xla_bugkit.replay.options import PLAIN
from xla_bugkit.replay.spawn import Child
from xla_bugkit.verdict import Outcome

pytestmark = pytest.mark.jax

TOTAL = """\
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()), ("rows",))
energy = jax.device_put(np.arange(98310.0) ** 2, NamedSharding(mesh, PartitionSpec("rows")))
total = jax.jit(lambda e: jnp.sum(e))
print(float(total(energy)))
"""


@pytest.fixture(scope="module")
def total(tmp_path_factory: pytest.TempPathFactory) -> ReplayInput:
    root = tmp_path_factory.mktemp("total")
    (root / "total.py").write_text(TOTAL)
    flags = ("--xla_force_host_platform_device_count=6",)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = " ".join((f"--xla_dump_to={root / 'dump'}", DUMP_FLAGS, *flags))
    done = proc.run_captured([sys.executable, str(root / "total.py")], env=env, timeout=120)
    failure = classify(done.output, exit_status=done.returncode)
    assert failure.kind is Kind.SUCCESS, done.output
    return Dumped(root / "dump", failure, flags).module("jit__lambda")


def test_a_sum_that_overflows_in_one_order_only_is_not_a_wrong_result(
    total: ReplayInput,
) -> None:
    options = replace(PLAIN, use_data=False, extreme_set="max")
    verdict = replay(total, expected=None, options=options)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.startswith("ran to completion; result agrees with op-by-op")
    assert "1 element is not judged, where a sum has no one right value: " in verdict.evidence
    assert "reduce): at 1 of 1 elements its finite terms of one sign add past float64's " in (
        verdict.evidence
    )


def test_the_same_sum_on_ordinary_values_is_still_judged(total: ReplayInput) -> None:
    verdict = replay(total, expected=None, options=replace(PLAIN, use_data=False))
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.startswith("ran to completion; result agrees with op-by-op")
    assert "not judged" not in verdict.evidence


def test_a_wrong_element_beside_an_unordered_sum_is_still_judged(tmp_path: Path) -> None:
    # The op-by-op child's own line for jit_total's sum, and a second output wrong at [1].
    said = (
        "reduce_sum.7 (reduce): at 1 of 1 elements its finite terms of one sign add past "
        "float64's largest value and those of the other pull back, so the order XLA adds "
        "them in decides whether it overflows"
    )
    test = [np.array(np.inf), np.array([0.0, 5.0])]
    reference = [np.array(np.nan), np.array([0.0, 1.0])]
    protocol.save_arrays(protocol.arrays_path(tmp_path, protocol.TEST), test)
    protocol.save_arrays(protocol.arrays_path(tmp_path, protocol.OPBYOP), reference)
    protocol.error_path(tmp_path, protocol.CONSERVATIVE).write_text("not asked")
    done = proc.Completed(0, f"{protocol.UNORDERED}{said}\n", False, 0.0)
    child = Child(done, tmp_path, Phase.RUN, "extreme values: max (seed 42)", None, tested=True)
    verdict = judge_result(ReplayInput("jit_total", tmp_path / "m.hlo.pb"), child, None, 300)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.numbers["first_indices"] == [[1, 1]]
    assert verdict.evidence.endswith(
        f"first at [1] of output 1; 1 element is not judged, where a sum has no one right "
        f"value: {said}"
    )
    # Without the child's line, on inputs made to overflow, an infinity against a NaN is
    # not judged either: which one an overflow ends in depends on the order.
    child = replace(child, done=proc.Completed(0, "", False, 0.0))
    verdict = judge_result(ReplayInput("jit_total", tmp_path / "m.hlo.pb"), child, None, 300)
    assert verdict.numbers["first_indices"] == [[1, 1]]
    assert verdict.evidence.endswith(
        "; 1 element is not judged, an infinity or NaN in both the result and the reference "
        "on the 'max' inputs (what an overflow ends in depends on the order XLA computes in)"
    )
    # On ordinary inputs the NaN reference judges the infinity.
    child = replace(child, inputs="generated (seed 42)")
    verdict = judge_result(ReplayInput("jit_total", tmp_path / "m.hlo.pb"), child, None, 300)
    assert verdict.numbers["first_indices"] == [[0], [1, 1]]


# An ordinary training step: a small MLP's squared loss and its gradient, one device.
TRAIN_STEP = """\
import jax, jax.numpy as jnp, numpy as np

def train_step(params, x, y):
    def losses(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2)[:, 0]

    def loss(p):
        rows = losses(p)
        return rows.mean(), rows

    (_, rows), grads = jax.value_and_grad(loss, has_aux=True)(params)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), rows

rng = np.random.default_rng(0)
params = {"w1": rng.normal(0, 0.3, (12, 32)).astype(np.float32),
          "b1": np.zeros(32, np.float32), "w2": rng.normal(0, 0.2, (32, 1)).astype(np.float32)}
x, y = rng.standard_normal((64, 12)).astype(np.float32), np.ones((64, 1), np.float32)
print(jax.jit(train_step)(params, x, y)[1][:4])
"""


@pytest.fixture(scope="module")
def train_step(tmp_path_factory: pytest.TempPathFactory) -> ReplayInput:
    root = tmp_path_factory.mktemp("train_step")
    (root / "train_step.py").write_text(TRAIN_STEP)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = f"--xla_dump_to={root / 'dump'} {DUMP_FLAGS}"
    done = proc.run_captured([sys.executable, str(root / "train_step.py")], env=env, timeout=120)
    failure = classify(done.output, exit_status=done.returncode)
    assert failure.kind is Kind.SUCCESS, done.output
    return Dumped(root / "dump", failure, ()).module("jit_train_step")


@pytest.mark.parametrize("name", ["max", "huge"])
def test_a_training_step_on_values_made_to_overflow_is_no_wrong_result(
    train_step: ReplayInput, name: str
) -> None:
    """Compiled, the step's dots add their products in tiles and end in NaN; op by op they
    ended in an infinity, or in a number where another order overflows: once called a wrong
    result of XLA on any training step whose run failed with a wrong value."""
    options = replace(PLAIN, use_data=False, extreme_set=name)
    verdict = replay(train_step, expected=None, options=options)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.startswith("ran to completion; result agrees with op-by-op")
    assert "where a sum has no one right value: dot_general" in verdict.evidence
    assert "(dot): at " in verdict.evidence and " its products of one sign add past " in (
        verdict.evidence
    )


def test_the_training_step_on_ordinary_and_nonfinite_values_is_still_judged(
    train_step: ReplayInput,
) -> None:
    for name in (None, "inf/nan"):
        options = replace(PLAIN, use_data=False, extreme_set=name)
        verdict = replay(train_step, expected=None, options=options)
        assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
        assert "not judged" not in verdict.evidence or name == "inf/nan", verdict.evidence
        assert "products of one sign" not in verdict.evidence
