"""What a Pallas kernel's replays say of a wrong value, read from the verdicts of bundles
collect wrote on a TPU v5e (``tests/tpu/recorded/``): the kernel's own code, a kernel
nothing outside the TPU checks, a compiled kernel its interpret mode proves wrong."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

from xla_bugkit.bundle import pallas
from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.verdict import COMPILED_DIFFERS, Verdict

RECORDED = Path(__file__).parents[1] / "tpu" / "recorded"


def _recorded(name: str) -> tuple[Failure, Verdict]:
    with zipfile.ZipFile(RECORDED / f"{name}.zip") as z:
        m = json.loads(z.read("manifest.json"))
    return Failure.from_json(m["failure"]), Verdict.from_json(m["modules"][0]["replay"])


def test_the_kernels_own_code_is_said_where_its_interpret_mode_fails_the_check_too() -> None:
    failure, own = _recorded("pallas_own_bug")
    said = pallas.own_code(failure, [own])
    assert said is not None
    assert said.startswith("the wrong value comes from the Pallas kernel's own code in jit(")
    assert pallas.unchecked(failure, [own]) is None  # its interpret mode checked it
    assert pallas.proven(own) is None  # agreement proves no wrong result
    crashed = replace(failure, kind=Kind.COMPILE_CRASH)
    assert pallas.own_code(crashed, [own]) is None  # only a wrong value is the kernel's


def test_a_kernel_nothing_checks_rests_on_the_programs_check_alone() -> None:
    failure, unchecked = _recorded("pallas_dma_zeros")
    said = pallas.unchecked(failure, [unchecked])
    assert said is not None and "rests on the program's check alone" in said
    assert "pallas_call(..., interpret=True)" in said  # how to check it by hand
    assert pallas.own_code(failure, [unchecked]) is None
    assert pallas.proven(unchecked) is None


def test_a_compiled_kernel_its_interpret_mode_proves_wrong_is_the_proof() -> None:
    failure, proof = _recorded("pallas_interpret")
    said = pallas.proven(proof)
    assert said == (
        f"the replay of {proof.module} on the TPU reproduces it (reproduced: wrong result: "
        f"{COMPILED_DIFFERS}, recorded by collect running the program under that mode)"
    )
    assert pallas.unchecked(failure, [proof]) is None
    assert pallas.own_code(failure, [proof]) is None
