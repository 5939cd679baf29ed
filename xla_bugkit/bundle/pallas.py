"""What a Pallas kernel's replays say of a wrong value the program's check found, beside
``excused``: the kernel's own code gives it (its interpret mode fails the check too: not
XLA's), nothing outside the TPU checks the kernel (the verdict rests on the program's check
alone), or the compiled kernel differs from its interpret mode (the proof). ``triage`` asks
here; the judge's ``kernel`` and ``reference`` numbers say which."""

from __future__ import annotations

from collections.abc import Sequence

from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.hlo.names import function_name, module_name
from xla_bugkit.replay import KERNEL_ONLY
from xla_bugkit.verdict import CANNOT_INTERPRET, COMPILED_DIFFERS, INTERPRET_MODE, OWN_CODE, Verdict


def own_code(f: Failure, verdicts: Sequence[Verdict]) -> str | None:
    """A wrong value the program's check found, which its Pallas kernel gives under the
    interpret mode too (the judge's ``kernel`` number): the kernel's code, not XLA's."""
    if f.kind is not Kind.WRONG_RESULT:
        return None
    found = next((v for v in verdicts if v.numbers.get("kernel") == OWN_CODE), None)
    if found is None:
        return None
    return (
        f"the wrong value comes from the Pallas kernel's own code in "
        f"{function_name(module_name(found.module))}: run under Pallas's TPU interpret mode "
        "(which simulates the kernel as written, without Mosaic's compiler), the program "
        "fails its check too, and the call's outputs there are the values the compiled "
        "kernel gives on the TPU. Look into the kernel's code (its indexing, its block "
        "shapes, its DMAs and their waits), not XLA or Mosaic"
    )


def unchecked(f: Failure, verdicts: Sequence[Verdict]) -> str | None:
    """A wrong value the program found in a TPU module whose Pallas kernel nothing outside
    the TPU can check: what the verdict rests on (the program's check alone), and how to
    tell the kernel's own bug from Mosaic's or libtpu's."""
    if f.kind is not Kind.WRONG_RESULT:
        return None
    found = next((v for v in verdicts if KERNEL_ONLY in v.evidence), None)
    if found is None:
        return None
    if CANNOT_INTERPRET in found.evidence:
        # collect ran the program under the interpret mode itself, and the mode failed.
        error = found.evidence.split(f"{CANNOT_INTERPRET}: ", 1)[1]
        return (
            f"the program's own check found a wrong value, and "
            f"{function_name(module_name(found.module))} holds a Pallas kernel (Mosaic's "
            "tpu_custom_call) that runs only on the TPU: its replay ran there on the recorded "
            f"inputs, and {CANNOT_INTERPRET} ({error}), so no reference checks its values and "
            "this rests on the program's check alone"
        )
    return (
        f"the program's own check found a wrong value, and "
        f"{function_name(module_name(found.module))} holds a Pallas kernel (Mosaic's "
        "tpu_custom_call) that runs only on the TPU: its replay ran there on the recorded "
        "inputs, but no reference outside the kernel can check its values, so this rests on "
        "the program's check alone. Run the kernel with pallas_call(..., interpret=True) on "
        "the same inputs: if that gives the right values, the TPU's compiled kernel (Mosaic "
        "or libtpu) is wrong; if not, the kernel's own code is"
    )


def proven(proof: Verdict) -> str | None:
    """What a replay that reproduced the failure, judged by the kernel's interpret mode,
    proves; None for any other verdict."""
    if not proof.reproduced or proof.numbers.get("reference") != INTERPRET_MODE:
        return None
    return (
        f"the replay of {proof.module} on the TPU reproduces it ({proof.outcome.value}: "
        f"{COMPILED_DIFFERS}, recorded by collect running the program under that mode)"
    )
