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

import pytest
from helpers.dumps import DUMP_FLAGS, Dumped

from xla_bugkit import proc
from xla_bugkit.failure.classify import Kind, classify
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import PLAIN
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
    assert "its finite terms' magnitudes add past float64's largest value" in verdict.evidence


def test_the_same_sum_on_ordinary_values_is_still_judged(total: ReplayInput) -> None:
    verdict = replay(total, expected=None, options=replace(PLAIN, use_data=False))
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.startswith("ran to completion; result agrees with op-by-op")
    assert "not judged" not in verdict.evidence
