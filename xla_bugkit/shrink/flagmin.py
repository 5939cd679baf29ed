"""Which of the user's XLA flags the failure needs (ddmin), and flags that work around it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from xla_bugkit.hlo import flags
from xla_bugkit.shrink.hlo_text import Candidate, Source, parse
from xla_bugkit.shrink.oracle import Answer
from xla_bugkit.shrink.session import Session

# Flags users can apply today that often hide an XLA:CPU bug; each is tried alone, on top of
# the flags the failure needs. A disabled-pass list is merged with the user's own.
WORKAROUNDS = (
    "--xla_disable_hlo_passes=algsimp",
    "--xla_disable_all_hlo_passes=true",
    "--xla_cpu_enable_fast_math=false",
    "--xla_cpu_experimental_ynn_fusion_type=",
    "--xla_cpu_max_isa=AVX",
    "--xla_backend_optimization_level=0",
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_cpu_enable_concurrency_optimized_scheduler=false",
)
DISABLED_PASSES = "--xla_disable_hlo_passes"
# A module that does nothing: a failure that shows on it too is the flags' alone.
TRIVIAL = "HloModule trivial\n\nENTRY main {\n  ROOT p = f32[8] parameter(0)\n}\n"


def ddmin(items: Sequence[str], fails: Callable[[list[str]], bool]) -> list[str]:
    """A 1-minimal subset of ``items`` for which ``fails`` holds (it holds for all of them)."""
    current = list(items)
    chunks = 2
    while len(current) >= 2:
        size = -(-len(current) // chunks)
        parts = [current[i : i + size] for i in range(0, len(current), size)]
        for part in parts:
            if fails(part):
                current, chunks = part, 2
                break
        else:
            for part in parts:
                rest = [x for x in current if x not in part]
                if fails(rest):
                    current, chunks = rest, max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(current):
                    break
                chunks = min(len(current), chunks * 2)
    return current


def with_flag(base: Sequence[str], extra: str) -> list[str]:
    """``base`` plus ``extra``; two disabled-pass lists become one (a later flag would replace
    the earlier list, not add to it)."""
    name = flags.name_of(extra)
    if name != DISABLED_PASSES:
        return [f for f in base if flags.name_of(f) != name] + [extra]
    passes: list[str] = []
    for f in [*base, extra]:
        if flags.name_of(f) == DISABLED_PASSES:
            passes += [p for p in (flags.value_of(f) or "").split(",") if p and p not in passes]
    rest = [f for f in base if flags.name_of(f) != DISABLED_PASSES]
    return [*rest, f"{DISABLED_PASSES}={','.join(passes)}"]


def disabled_passes(needed: Sequence[str]) -> list[str]:
    """The HLO passes that ``needed`` flags disable: the failure needs them off."""
    return [
        name
        for f in needed
        if flags.name_of(f) == DISABLED_PASSES
        for name in (flags.value_of(f) or "").split(",")
        if name
    ]


def needed_flags(s: Session, module: Candidate, user_flags: Sequence[str]) -> list[str]:
    """The user's flags the failure needs: none when it fails without them."""
    if not user_flags or s.check(module, xla_flags=[]).answer is Answer.SAME:
        return []
    return ddmin(user_flags, lambda subset: s.check(module, xla_flags=subset).answer is Answer.SAME)


def module_independent(s: Session, needed: Sequence[str]) -> bool:
    """Whether the needed flags alone make a module that does nothing fail the same way."""
    if not needed or s.oracle.wrong_result:
        return False
    trivial = parse(TRIVIAL)
    # Its parameter takes seeded data: it stands for no argument of the original module.
    trivial = replace(trivial, sources=(Source(),))
    return s.check(trivial, xla_flags=needed).answer is Answer.SAME


def workarounds(s: Session, module: Candidate, extra: Sequence[str] = ()) -> list[str]:
    """Flags from ``WORKAROUNDS`` (and ``extra``) that make the run clean and correct."""
    found = []
    for flag in dict.fromkeys([*extra, *WORKAROUNDS]):
        if s.check(module, xla_flags=with_flag(s.xla_flags, flag)).answer is Answer.CLEAN:
            found.append(flag)
    return found
