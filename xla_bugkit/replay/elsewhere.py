"""A module recorded on a platform this machine lacks (a GPU bundle on a CPU-only machine):
never "not reproduced", but "unverified", with what could be checked here.

What is checked: the module parses, its inputs load, and the unoptimized module runs on the
CPU where it calls nothing GPU-only ("also fails on the CPU" says the bug is not the GPU's
alone; "the CPU runs it correctly" says it may be). And the command that verifies it on a
machine that has the platform.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from xla_bugkit import jaxlib_adapter, platforms
from xla_bugkit.errors import BugkitError
from xla_bugkit.frameworks import is_release_number
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.hlo.parser import custom_call_targets
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.verdict import Outcome, Verdict


@dataclass(frozen=True)
class Unverified:
    """Why a module was not verified here, and what was."""

    needs: str  # "CUDA", "ROCm", "a TPU"
    checked: tuple[str, ...]  # what was checked here, one line each
    cpu: str  # what the CPU run of the unoptimized module showed
    command: str  # what verifies it where the platform is
    cpu_verdict: Verdict | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "needs": self.needs,
            "checked": list(self.checked),
            "cpu": self.cpu,
            "command": self.command,
            "cpu_verdict": self.cpu_verdict.to_json() if self.cpu_verdict else None,
        }


def absent_here(platform: str) -> bool:
    """Whether ``platform`` certainly has no backend here (no plugin that could give one;
    jaxlib gives the CPU alone)."""
    found = platforms.find(platform)
    if found is None:
        return True  # no plugin we know of gives it
    return bool(found.plugins) and not any(_installed(p) for p in found.plugins)


def _installed(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_platform(verdict: Verdict) -> bool:
    """The replay child found no backend for the module's platform."""
    return (
        verdict.outcome is Outcome.NOT_REPLAYABLE and jaxlib_adapter.UNAVAILABLE in verdict.evidence
    )


def needs(platform: str, versions: Mapping[str, str]) -> str:
    """What the module needs, as a person names it, from the bundle's recorded versions."""
    found = platforms.find(platform)
    if found is None:
        return platform
    return "ROCm" if _rocm(found, versions) else found.needs


def _rocm(found: platforms.Platform, versions: Mapping[str, str]) -> bool:
    """A GPU module recorded under ROCm's plugin: the GPU row's other vendor."""
    rocm = [p for p in found.plugins if p.startswith("jax-rocm")]
    return bool(rocm) and any(k.startswith("jax-rocm") for k in versions)


def checks(inp: ReplayInput) -> tuple[str, ...]:
    """What a machine without the platform can check of ``inp``: one line each."""
    lines = []
    try:
        proto = hlo_proto.read_hlo_proto(inp.hlo) if inp.hlo.suffix != ".txt" else None
        if proto is not None:
            count = len(hlo_proto.parameter_shapes(proto))
            noun = "parameter" if count == 1 else "parameters"
            lines.append(f"the module parses ({proto.hlo_module.name}, {count} {noun})")
    except BugkitError as e:
        lines.append(f"the module does not parse: {e}")
    if inp.snapshot is not None:
        try:
            snapshot = hlo_proto.read_snapshot(inp.snapshot)
            size = inp.snapshot.stat().st_size
            lines.append(
                f"its recorded inputs load ({len(snapshot.arguments)} arguments, "
                f"{size / 1e6:.1f} MB)"
            )
        except (BugkitError, OSError) as e:
            lines.append(f"its recorded inputs do not load: {e}")
    targets = _custom_calls(inp)
    if targets:
        lines.append(f"custom calls: {', '.join(targets)}")
    return tuple(lines)


def _custom_calls(inp: ReplayInput) -> list[str]:
    text_path = inp.hlo.with_name(inp.hlo.name.replace(".hlo.pb", ".txt"))
    path = inp.hlo if inp.hlo.suffix == ".txt" else text_path
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return []
    return sorted(set(custom_call_targets(text)))


def cpu_line(verdict: Verdict, platform: str) -> str:
    """What the CPU run of the unoptimized module says about the recorded failure."""
    if verdict.reproduced and verdict.computing:
        return (
            f"on the CPU too it computes past its bound ({verdict.evidence}): a loop that "
            "ends nowhere, which its own condition may decide, not XLA"
        )
    if verdict.reproduced:
        return f"also fails on the CPU, the same way: {verdict.evidence}"
    if verdict.outcome is Outcome.NOT_REPLAYABLE:
        return f"not run on the CPU: {verdict.evidence}"
    if verdict.failure is not None:
        return f"fails differently on the CPU: {verdict.evidence}"
    found = platforms.find(platform)
    whose = f"the {found.device if found is not None else platform}'s"
    return f"the CPU runs it correctly ({verdict.evidence}): the failure may be {whose} alone"


def command(bundle: str, platform: str, versions: Mapping[str, str], install: str) -> str:
    """The command that verifies the bundle on a machine with the platform (``install``:
    how xla-bugkit itself is installed there)."""
    jax = versions.get("jax", "")
    pin = f"=={jax}" if is_release_number(jax) else ""  # a bundle's text: only a version
    verify = f"{install} && xla-bugkit verify {shlex.quote(bundle)}"
    found = platforms.find(platform)
    if found is not None and _rocm(found, versions):
        return f"with jax{pin} and its ROCm plugin installed: {verify}"
    extra = platforms.extra(found, frozenset(versions)) if found is not None else ""
    jax_with = f"jax[{extra}]" if extra else "jax"
    return f"pip install '{jax_with}{pin}' && {verify}"
