"""Out of memory: the module whose buffer assignment holds the allocation XLA could not make,
found on a real run where the error surfaces one computation later."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.choose.allocation import failed_allocation
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode


def test_the_size_is_the_last_allocation_xla_said_it_could_not_make() -> None:
    text = (
        "E1203 cpu_client.cc:1933] Failed to get literal for result: RESOURCE_EXHAUSTED: Out "
        "of memory allocating 6144128088 bytes.\njax.errors.JaxRuntimeError: INTERNAL: Error "
        "dispatching computation: Out of memory allocating 1099511627776 bytes.\n"
    )
    assert failed_allocation(text) == 1099511627776
    assert failed_allocation("RESOURCE_EXHAUSTED: Failed to allocate buffer for Literal") is None


@pytest.mark.slow
def test_an_asynchronous_out_of_memory_chooses_the_module_that_ran_out(tmp_path: Path) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "sharded_async_oom.py")])
    # Reproduced; 1 TiB is more than the machine has: not XLA's bug, so 3.
    assert c.returncode == ExitCode.NOT_REPRODUCED, c.stderr[-3000:]
    m = c.manifest()
    first = m["modules"][0]
    # jnp.mean raised the error; the sharded computation before it ran out of memory.
    assert first["label"].endswith("jit_nearest_gap"), [e["label"] for e in m["modules"]]
    assert first["reasons"][0].startswith(
        "its buffer assignment holds the 1,099,511,627,776 bytes XLA could not allocate "
        "(allocation "
    )
    assert first["replay"]["outcome"] == "reproduced: error"
    # The replay raises the bare status; the run saw it wrapped by the dispatch.
    assert "Error dispatching" not in m["failure"]["signature"]
    assert main(["verify", "-q", str(c.bundle)]) == ExitCode.OK
