"""Reasons from the hook's records: under jax_debug_nans, the call whose outputs jax's check
rejected, not the ops of jax's de-optimized rerun of it."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.run.evidence import Event, ProcessEvidence, debug_check

# What jax raises from a checked call, as records say it: jax 0.4.36 and later, and earlier.
CHECKED = "InternalFloatingPointError: ('jit(side_lengths)', 'nan')"
CHECKED_OP = "InternalFloatingPointError: ('jit(sqrt)', 'nan')"
OLDER = "FloatingPointError: invalid value (nan) encountered in jit(side_lengths)"
OLDER_INF = "FloatingPointError: invalid value (inf) encountered in jit(log)"


def test_debug_check_tells_jax_checks_error_from_others() -> None:
    assert debug_check(CHECKED) == "jax_debug_nans"
    assert debug_check(OLDER) == "jax_debug_nans"
    assert debug_check(OLDER_INF) == "jax_debug_infs"
    assert debug_check("FloatingPointError: invalid value encountered in sqrt") is None
    assert debug_check("JaxRuntimeError: INTERNAL: nan") is None
    assert debug_check(None) is None


def _call(n: int, module: str, error: str | None = None) -> Event:
    return Event("execute", n, module, None, started=float(n), ended=n + 0.5, error=error)


@pytest.mark.parametrize("first", [CHECKED, OLDER])
def test_the_rerun_of_a_checked_call_leads_back_to_it(first: str) -> None:
    events = (
        _call(2, "jit_side_lengths"),
        _call(4, "jit_side_lengths", first),
        _call(6, "jit_multiply"),
        _call(8, "jit_sqrt", CHECKED_OP),
        _call(10, "jit_sqrt", CHECKED_OP),
    )
    p = ProcessEvidence(pid=7, ppid=1, argv=("x.py",), events=events)
    assert p.raised == events[1]
    # Another error before the checked call ends the search: that call is not the rerun.
    p = ProcessEvidence(7, 1, ("x.py",), (_call(2, "jit_f", "JaxRuntimeError: INTERNAL: x"),
                                          *events[2:]))  # fmt: skip
    assert p.raised == events[3]


@pytest.mark.jax
@pytest.mark.slow
def test_jax_debug_nans_chooses_the_programs_function_and_says_the_nan_is_its_own(
    tmp_path: Path,
) -> None:
    """tests/programs/debug_nans_sqrt.py: before, the modules chosen were the ``jit(sqrt)``
    of jax's de-optimized rerun, and the verdict "the program's own check found a wrong
    value"."""
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "debug_nans_sqrt.py")])
    assert c.returncode == 3, c.stderr
    manifest = c.manifest()
    assert manifest["failure"]["kind"] == "wrong result"
    first = manifest["modules"][0]
    # The second compile of side_lengths: the 5-shape call whose outputs held the NaN.
    assert first["label"].endswith("jit_side_lengths"), [m["label"] for m in manifest["modules"]]
    texts = [n for n in c.names() if first["label"] in n and n.endswith(".txt")]
    with zipfile.ZipFile(c.bundle) as z:
        assert any("f32[5,4,2]" in z.read(n).decode() for n in texts), texts
    assert "jax_debug_nans found a NaN in the outputs of this call" in first["reasons"][0]
    assert "the check stopped at jit_sqrt" in first["reasons"][0]
    assert not any("sqrt" in m["label"] for m in manifest["modules"])
    assert (
        "this does not look like an XLA bug: jax_debug_nans stopped the program at a NaN that "
        "sqrt made in jit(side_lengths)"
    ) in " ".join(c.stderr.split())
    assert "the program's own check found a wrong value" not in c.stderr
