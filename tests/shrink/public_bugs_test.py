"""``shrink`` on public XLA bug reports that still fail on jaxlib 0.10.2 (CPU).

Each program in tests/shrink/programs names its report and what was measured here. Every
test collects the program's bundle, shrinks it, and checks two things against that
measurement: the shrunk module fails the same way through ``verify``'s normal replay, and
the culprit and workarounds named are the true ones.
"""

from __future__ import annotations

import json
import platform
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.programs import Collected
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode

pytestmark = pytest.mark.slow  # a real jax program, a shrink and a verify each

# Generous: a probe of these modules takes seconds; nothing here is bounded by speed.
SHRINK = ["--budget", "60m", "--probe-timeout", "60"]


def _has_fma() -> bool:
    if platform.machine() != "x86_64":
        return False
    try:
        return " fma " in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class Shrunk:
    """A shrunk bundle: its shrink record, the shrunk module's text and its verify verdict."""

    def __init__(self, out: Path, capsys: pytest.CaptureFixture[str], *, verify: bool) -> None:
        with zipfile.ZipFile(out) as z:
            manifest = json.loads(z.read("manifest.json"))
            self.issue = z.read("ISSUE.md").decode()
            name = next(n for n in z.namelist() if n.endswith("shrunk.before_optimizations.txt"))
            self.text = z.read(name).decode()
            # The module around the named pass (shrunk/before_PASS.txt, after_PASS.txt).
            self.around = {
                n.split("/", 1)[1]: z.read(n).decode()
                for n in z.namelist()
                if n.startswith("shrunk/") and n.endswith("_algsimp.txt")
            }
        self.record: dict[str, Any] = manifest["shrink"]
        label = manifest["modules"][-1]["label"]
        assert label.endswith(".shrunk")
        self.verify_code, self.verdict = -1, {}
        if verify:
            capsys.readouterr()
            self.verify_code = main(["verify", "--json", str(out)])
            modules = json.loads(capsys.readouterr().out)["modules"]
            self.verdict = next(m for m in modules if m["label"] == label)["verdict"]


@pytest.fixture
def shrunk(
    shrink_bundles: Callable[..., Collected],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., Shrunk]:
    """``shrunk("sort_cmp")``: the program's bundle shrunk, and the result verified."""

    def get(program: str, *extra: str) -> Shrunk:
        bundle = shrink_bundles(program).bundle
        out = tmp_path / f"{program}.shrunk.zip"
        assert main(["shrink", str(bundle), "-o", str(out), *SHRINK, *extra]) == ExitCode.OK
        return Shrunk(out, capsys, verify=not extra)

    return get


def test_a_crash_inside_algsimp_in_odeint(shrunk: Callable[..., Shrunk]) -> None:
    # jax-ml/jax#26051: algsimp replaces abs(complex iota) by the iota and aborts.
    found = shrunk("abs_complex")
    assert found.verify_code == ExitCode.OK
    assert found.verdict["outcome"] == "reproduced: crash"
    assert "algebraic_simplifier.cc" in found.verdict["evidence"]
    record = found.record
    assert record["culprit"] == {"pass": "algsimp", "how": "crash-inside"}
    assert "--xla_disable_hlo_passes=algsimp" in record["workarounds"]
    # odeint's module is about 500 instructions; the bug needs a complex value and its abs.
    assert record["instructions_before"] >= 300
    assert record["instructions_after"] <= 5
    assert " abs(" in found.text and "c128[" in found.text
    assert "crash inside HLO pass algsimp" in found.issue
    # The pass never finished: the module right before it, alone.
    assert list(found.around) == ["before_algsimp.txt"]
    assert " abs(" in found.around["before_algsimp.txt"]
    assert "the module right before and after the pass: shrunk/before_algsimp.txt" in found.issue


def test_a_wrong_fold_of_sqrt_abs_square(shrunk: Callable[..., Shrunk]) -> None:
    # jax-ml/jax#37919: sqrt(abs(square(x))) becomes abs(x), which is finite at float32 max.
    found = shrunk("sqrt_square")
    assert found.verify_code == ExitCode.OK
    assert found.verdict["outcome"] == "reproduced: wrong result"
    record = found.record
    assert record["oracle"].startswith("wrong result: inf mismatch")
    assert record["culprit"] == {"pass": "algsimp", "how": "disabling-hides"}
    assert "--xla_disable_hlo_passes=algsimp" in record["workarounds"]
    # Every instruction is part of the fold: nothing can go.
    assert all(op in found.text for op in (" multiply(", " abs(", " sqrt("))
    # Right before algsimp the module still squares and takes the root; right after, not.
    before, after = found.around["before_algsimp.txt"], found.around["after_algsimp.txt"]
    assert " sqrt(" in before and " multiply(" in before
    assert " sqrt(" not in after
    assert "shrunk/before_algsimp.txt, shrunk/after_algsimp.txt" in found.issue


def test_a_sort_comparator_crash_is_not_an_hlo_pass(shrunk: Callable[..., Shrunk]) -> None:
    # openxla/xla#47366: the CPU emitter never emits what a sort comparator calls.
    found = shrunk("sort_cmp")
    assert found.verify_code == ExitCode.OK
    assert found.verdict["outcome"] == "reproduced: crash"
    assert "Map key not found" in found.verdict["evidence"]
    record = found.record
    assert record["culprit"] == {"pass": None, "how": "not-a-pass"}
    assert record["workarounds"] == []  # no flag hides it: measured with each one
    assert record["instructions_after"] < record["instructions_before"]
    # What the crash needs stays: a sort whose comparator calls a reduce.
    assert " sort(" in found.text and " reduce(" in found.text
    assert "not an HLO pass" in found.issue


NEEDS_FMA = pytest.mark.skipif(not _has_fma(), reason="the NaN needs an x86-64 CPU with FMA")


@NEEDS_FMA
def test_an_fma_nan_in_a_big_expm_module(shrunk: Callable[..., Shrunk]) -> None:
    # jax-ml/jax#38609: the softmax's x*scale is computed in two fusions, LLVM contracts
    # one of them into an FMA, and the two copies disagree: NaN.
    found = shrunk("expm_fma")
    assert found.verify_code == ExitCode.OK
    assert found.verdict["outcome"] == "reproduced: wrong result"
    assert "NaN" in found.verdict["evidence"]
    record = found.record
    assert record["oracle"].startswith("wrong result: nan mismatch")
    # Disabling fusion hides it, but the fault is FP contraction: worded as "hides".
    assert record["culprit"] == {"pass": "fusion", "how": "disabling-hides"}
    assert "disabling HLO pass fusion hides the failure (not proof" in found.issue
    assert "--xla_cpu_max_isa=AVX" in record["workarounds"]  # no FMA instructions
    assert "--xla_cpu_enable_fast_math=false" not in record["workarounds"]
    # expm's Padé step and squaring loop are gone; the softmax that turns NaN stays.
    assert record["instructions_before"] >= 400
    assert record["instructions_after"] <= record["instructions_before"] // 10
    assert " while(" not in found.text and " exponential(" in found.text


@NEEDS_FMA
def test_passes_alone_name_fusion_on_the_whole_expm_module(
    shrunk: Callable[..., Shrunk],
) -> None:
    # Without the module stage the pass search runs on all 429 instructions, where disabling
    # every pass that changed the module leaves a scatter XLA:CPU cannot emit; one pass at a
    # time still finds fusion, and its flag is a workaround (the all-passes flag is not).
    found = shrunk("expm_fma", "--only", "flags,passes")
    record = found.record
    assert record["instructions_after"] == record["instructions_before"]
    assert record["culprit"] == {"pass": "fusion", "how": "disabling-hides"}
    assert "--xla_disable_hlo_passes=fusion" in record["workarounds"]
    assert "--xla_cpu_max_isa=AVX" in record["workarounds"]
    assert "--xla_disable_all_hlo_passes=true" not in record["workarounds"]
    assert not [n for n in record["notes"] if "inconclusive" in n]
