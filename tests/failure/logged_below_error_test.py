"""A status quoted in a line Python's logging wrote below ERROR is not the program's failure.

Every CPU-only process whose program calls ``logging.basicConfig(level=logging.INFO)`` (or
DEBUG) logs jax's probe for a TPU: ``Unable to initialize backend 'tpu': INTERNAL: Failed to
open libtpu.so ...``. Read as the failure's status, it made an out-of-memory the program
caught, and a watchdog's exit while XLA ran, an "XLA CPU runtime error: INTERNAL: Failed to
open libtpu.so". The excerpts are real output of jaxlib 0.10.2 under the logging formats
programs give themselves; the ``own_error_*`` ones log the program's own caught XLA error at
ERROR, which is its failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.failure import xla_status

DATA = Path(__file__).parent / "data" / "logged_below_error"
INFO_ONLY = sorted(p for p in DATA.glob("*.txt") if not p.name.startswith("own_error"))
OWN_ERROR = sorted(DATA.glob("own_error*.txt"))


def test_the_excerpts_are_there() -> None:
    assert len(INFO_ONLY) >= 5 and len(OWN_ERROR) >= 2
    for p in INFO_ONLY + OWN_ERROR:
        assert "Unable to initialize backend 'tpu': INTERNAL:" in p.read_text()


@pytest.mark.parametrize("excerpt", INFO_ONLY, ids=lambda p: p.stem)
def test_a_status_logged_at_info_or_debug_is_not_the_failure(excerpt: Path) -> None:
    assert xla_status.last_status(excerpt.read_text()) is None


@pytest.mark.parametrize("excerpt", OWN_ERROR, ids=lambda p: p.stem)
def test_the_programs_own_error_line_after_it_is(excerpt: Path) -> None:
    found = xla_status.last_status(excerpt.read_text())
    assert found is not None
    _, code, message = found
    assert code == "RESOURCE_EXHAUSTED"
    assert message.startswith("Out of memory allocating 4398046511104 bytes")


@pytest.mark.parametrize(
    "line",
    [
        "WARNING:absl:job failed in XLA: INTERNAL: something",
        "2026-12-06 15:37:29,472 - trainer - WARNING - retrying: UNAVAILABLE: socket closed",
        "[12/06/26 15:37:07] INFO     Unable to initialize backend 'tpu': INTERNAL: no",
    ],
)
def test_other_levels_below_error_in_other_formats(line: str) -> None:
    assert xla_status.last_status(line + "\n") is None


@pytest.mark.parametrize(
    "line",
    [
        "step 12 failed in XLA: INTERNAL: Generated function failed: CpuCallback error",
        "ERROR:trainer:step failed: INTERNAL: Generated function failed",
        "2026-12-06 15:37:29,472 - trainer - CRITICAL - giving up: INTERNAL: boom",
        "INFORMATION RETRIEVAL job failed: INTERNAL: boom",
    ],
)
def test_a_programs_own_words_quoting_a_status_still_count(line: str) -> None:
    found = xla_status.last_status(line + "\n")
    assert found is not None and found[1] == "INTERNAL"
