"""ddmin over flags, and how a workaround joins the user's flags."""

from __future__ import annotations

from xla_bugkit.shrink.flagmin import ddmin, with_flag


def test_ddmin_finds_the_one_flag_needed() -> None:
    flags = [f"--xla_f{i}=1" for i in range(8)]
    tried: list[list[str]] = []

    def fails(subset: list[str]) -> bool:
        tried.append(subset)
        return "--xla_f5=1" in subset

    assert ddmin(flags, fails) == ["--xla_f5=1"]
    assert len(tried) <= 8


def test_ddmin_keeps_a_pair_needed_together() -> None:
    flags = [f"--xla_f{i}=1" for i in range(6)]
    found = ddmin(flags, lambda s: "--xla_f1=1" in s and "--xla_f4=1" in s)
    assert sorted(found) == ["--xla_f1=1", "--xla_f4=1"]


def test_disabled_pass_lists_are_merged() -> None:
    base = ["--xla_disable_hlo_passes=cse", "--xla_cpu_enable_fast_math=false"]
    merged = with_flag(base, "--xla_disable_hlo_passes=algsimp")
    assert merged == ["--xla_cpu_enable_fast_math=false", "--xla_disable_hlo_passes=cse,algsimp"]


def test_a_flag_replaces_the_users_value() -> None:
    merged = with_flag(["--xla_cpu_enable_fast_math=true"], "--xla_cpu_enable_fast_math=false")
    assert merged == ["--xla_cpu_enable_fast_math=false"]
