"""Failures that reproduce and are still not XLA's doing, and what each verdict rests on: an
allocation no allocator could give where it ran, a module larger than the accelerator's
memory, a wrong value the run's own fast-math flags allow, a compile past a limit the run's
own TPU flags set. ``triage`` asks here before it takes a replay for proof."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xla_bugkit.choose import allocation
from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.verdict import Outcome, Verdict


def reason(
    f: Failure,
    *,
    memory_cap: int | None = None,
    host_memory: int | None = None,
    relaxed_by: Sequence[str] = (),
    limited_by: Sequence[str] = (),
    largest_buffers: Sequence[str] = (),
    replayed: Sequence[Verdict] = (),
    output: str = "",
) -> str | None:
    """Why ``f`` is not XLA's doing however its replay ends, or None: an allocation larger
    than the address-space cap the program set itself (``memory_cap``) or, on the CPU, than
    the machine's RAM and swap (``host_memory``); a module larger than the chip; a run-time
    allocation larger than the chip had free (the run's ``output`` says how much), which no
    replay (``replayed``) reproduced on a chip of its own; a wrong value that only the run's
    own fast-math flags make (``relaxed_by``: ``own_flags.OwnFlags.relaxing``); a compile
    out of a limit that compiles and runs without the run's own TPU flags (``limited_by``:
    ``own_flags.OwnFlags.limiting``)."""
    return (
        _over_own_cap(f, memory_cap)
        or _over_host_memory(f, host_memory)
        or _over_device_memory(f, largest_buffers)
        or _short_at_run_time(f, output, largest_buffers, replayed)
        or _relaxed(f, relaxed_by)
        or _own_limit(f, limited_by)
        or _own_blocks(f)
    )


def _too_large(f: Failure, limit: int | None) -> int | None:
    """The size of the allocation XLA said it could not make, when it alone is over
    ``limit``: a replay under the same limit fails the same way whatever XLA does."""
    if limit is None or not _allocating(f):
        return None
    size = allocation.failed_allocation(f.headline)
    return size if size is not None and size > limit else None


def _allocating(f: Failure) -> bool:
    """``f`` is of a kind an allocation XLA could not make shows as."""
    return KINDS[f.kind].out_of_memory_running or KINDS[f.kind].out_of_memory_compiling


def _over_own_cap(f: Failure, cap: int | None) -> str | None:
    if (size := _too_large(f, cap)) is None:
        return None
    return (
        f"XLA could not allocate {size:,} bytes in one piece under the {cap:,}-byte "
        "address-space cap (RLIMIT_AS) the program set itself: an allocation larger than "
        "the cap cannot succeed, so raise the cap; if this computation should not need that "
        "much, the module's buffer assignment (in the bundle) shows what XLA planned"
    )


def _over_host_memory(f: Failure, memory: int | None) -> str | None:
    # The replay runs capped below the RAM (``replay.limits``): it fails the same way too.
    if (size := _too_large(f, memory)) is None:
        return None
    return (
        f"XLA could not allocate {size:,} bytes in one piece, more than the "
        f"{memory:,} bytes of RAM and swap of the machine it ran on: no allocator can "
        "give that there, so the replay failing the same way proves nothing of XLA; if "
        "this computation should not need that much, the module's buffer assignment (in "
        "the bundle) shows what XLA planned and for which shape"
    )


def _over_device_memory(f: Failure, largest: Sequence[str]) -> str | None:
    # The TPU compiler checks the whole module against the chip's memory before it runs.
    if not _allocating(f) or (sizes := allocation.over_device_memory(f.headline)) is None:
        return None
    need, have = sizes
    buffers = f" (largest: {'; '.join(largest)})" if largest else ""
    return (
        f"the module needs {need} of the accelerator's memory (HBM) at once and the chip has "
        f"{have}: the program is too large for this chip, which no compiler can fix; the "
        f"memory-usage report (in the bundle) lists the largest buffers{buffers}. Usual "
        "remedies: a smaller batch or sequence, jax.checkpoint (rematerialization) on the largest "
        "activations, donate_argnums for buffers the step replaces, bfloat16, or the arrays "
        "sharded over more chips; if it should need far less, compare the report's buffers "
        "with the shapes you expect"
    )


# How much of the end of a run's output is searched for what the allocator said.
_TAIL = 1 << 16


def run_time_shortfall(f: Failure, output: str) -> tuple[str, str] | None:
    """(asked, free) when ``f`` is the TPU runtime out of device memory as a computation
    started (``Failure.out_of_memory_running``: RESOURCE_EXHAUSTED; JAX's headline is its
    error code, "E0100: RuntimeBufferAllocationFailure:", the sizes follow on the next line of
    ``output``, in the TPU allocator's words)."""
    if not f.out_of_memory_running:
        return None
    # The output holds the headline and what follows it; without it, the headline alone.
    return allocation.short_at_run_time(output[-_TAIL:] or f.headline)


def _short_at_run_time(
    f: Failure, output: str, largest: Sequence[str], replayed: Sequence[Verdict]
) -> str | None:
    """The TPU runtime out of memory as a computation started: what it asked was more than
    was free beside the arrays still alive. Not when a replay on a chip of its own ran out
    too: then the module alone does not fit, although its compile said it would."""
    if (sizes := run_time_shortfall(f, output)) is None:
        return None
    if any(v.reproduced for v in replayed):
        return None
    asked, free = sizes
    ran = [v.module for v in replayed if v.outcome is Outcome.NOT_REPRODUCED]
    alone = (
        f"; the module alone fits the chip: its replay ({', '.join(ran)}), on a chip holding "
        "nothing else, ran to completion"
        if ran
        else "; the compiler had accepted the module for this chip"
    )
    report = f" (its memory-usage report, largest: {'; '.join(largest)})" if largest else ""
    return (
        f"the accelerator had {free} free when the module asked for {asked} as it started "
        f"to run: the rest of the chip's memory (HBM) was held by arrays still alive, most "
        f"likely the program's own{alone}{report}. Not a compiler's doing: free the chip "
        "first. Usual remedies: del (or .delete()) the arrays the program no longer needs "
        "(jax.live_arrays() lists them), donate_argnums for buffers a step replaces, "
        "jax.clear_caches() for cached executables, a smaller batch"
    )


def _relaxed(f: Failure, relaxed_by: Sequence[str]) -> str | None:
    if not relaxed_by or f.kind is not Kind.WRONG_RESULT:
        return None
    return (
        f"the result differs only under the run's own XLA flags that let XLA change "
        f"floating-point results on purpose ({' '.join(relaxed_by)}: no NaN, infinity "
        "or exact division promised); without them it agrees with its references, as "
        "those flags are documented to allow"
    )


# How a compiler says it ran past a limit: the status code, or (its code lost in a wrapper)
# the TPU compiler's own words for a kernel's scoped VMEM ("E1001: CompileTimeScopedVmemOom:",
# "Ran out of memory in memory space vmem", "exceeded scoped vmem limit by 4.00M").
_OVER_LIMIT = re.compile(r"RESOURCE_EXHAUSTED|Oom\b|[Rr]an out of memory|exceeded [\w ]*limit")


def over_compile_limit(f: Failure) -> bool:
    """``f`` is a compile that ran out of a resource (RESOURCE_EXHAUSTED), a limit such as the
    TPU compiler's scoped VMEM (``--xla_tpu_scoped_vmem_limit_kib``)."""
    if not KINDS[f.kind].out_of_memory_compiling:
        return False
    return f.status_code == "RESOURCE_EXHAUSTED" or _OVER_LIMIT.search(f.headline) is not None


def _own_limit(f: Failure, limited_by: Sequence[str]) -> str | None:
    # Without the run's flags the module compiled and ran: the limit it exceeds is theirs.
    if not limited_by or not over_compile_limit(f):
        return None
    flag, them = ("flags", "them") if len(limited_by) > 1 else ("flag", "it")
    return (
        f"the run's own TPU {flag} (LIBTPU_INIT_ARGS {' '.join(limited_by)}) set the limit "
        f"the module exceeds: without {them} it compiles and runs. Raise that limit or drop "
        f"the {flag} (the compiler's default limit fits this module)"
    )


# The TPU compiler's words for a window (one grid step's block of an operand, as a Pallas
# kernel's BlockSpec asks for it) that does not fit the chip's VMEM: "Allocation (size=N)
# would exceed memory (size=M) :: ... space=vmem, ... tag = 'input window allocation for
# operator input 0. The window shape is f32[4096,8192], while the full shape is ...'".
_WINDOW_OVER_VMEM = re.compile(
    r"Allocation \(size=(?P<need>\d+)\) would exceed memory \(size=(?P<have>\d+)\)"
    r".*?space=(?P<space>[sv]mem)\b.*?(?P<which>input|output) window allocation for operator "
    r"(?:input|output) (?P<operand>\d+)\. The window shape is (?P<window>\S+?), while the "
    r"full shape is (?P<full>\S+?)\.(?:.*?(?P<levels>\d+) buffering levels)?",
    re.S,
)


def _own_blocks(f: Failure) -> str | None:
    """A compile out of VMEM (or SMEM) for one window of an operand: the block the program's
    own kernel asks for each grid step, which only the program can make smaller."""
    if not KINDS[f.kind].out_of_memory_compiling:
        return None
    found = _WINDOW_OVER_VMEM.search(f.headline)
    if found is None:
        return None
    levels = f", {found['levels']} buffers deep" if found["levels"] else ""
    return (
        f"the program's own kernel asks for a {found['space'].upper()} window larger than the "
        f"chip has: one block of its {found['which']} {found['operand']} "
        f"({found['window']} of {found['full']}{levels}) needs {int(found['need']):,} bytes "
        f"of the {int(found['have']):,} there are. The block sizes are the program's (a "
        "Pallas kernel's BlockSpec, its grid): smaller blocks fit"
    )
