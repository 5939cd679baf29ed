"""What a bundle holds beyond a module's own dump files, as the summary and ISSUE.md tell it:
pass dumps (``collect --dump-passes``) and the jaxpr JAX traced the function to."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from xla_bugkit.bundle import layout, members
from xla_bugkit.bundle.layout import Planned
from xla_bugkit.choose.dumps import Role

INLINE_JAXPR_LINES = 80  # a jaxpr this short is shown in ISSUE.md itself


def pass_dump_notes(planned: Sequence[Planned], dropped: Sequence[str]) -> list[str]:
    """What the bundle holds of each module's pass dumps, in one line each. ``planned``
    holds what is kept; ``dropped`` what the size budget left out."""
    kept: dict[str, int] = {}
    for p in planned:
        if p.role is Role.PASS_DUMP:
            kept[p.module] = kept.get(p.module, 0) + 1
    gone: dict[str, int] = {}
    for name in dropped:
        parts = name.split("/")
        if len(parts) == 4 and parts[0] == members.MODULES and parts[2] == layout.PASSES:
            gone[parts[1]] = gone.get(parts[1], 0) + 1
    notes = []
    for label in dict.fromkeys([*kept, *gone]):
        folder = members.module_member(label, layout.PASSES)
        if not kept.get(label):
            note = f"pass dumps of {label}: all {gone[label]} left out to fit the size budget"
        else:
            note = f"pass dumps of {label}: {kept[label]} under {folder}/"
            if gone.get(label):
                note += f"; the {gone[label]} dumped earliest left out to fit the size budget"
        notes.append(note)
    return notes


def files_by_role(planned: Sequence[Planned], label: str) -> dict[str, str]:
    """A module's bundled files by role; its pass dumps and Mosaic dumps, many of one role,
    are in the manifest's file list and under its ``passes/`` and ``mosaic/`` folders; of
    several jaxprs, the newest."""
    return {
        p.role.value: p.arcname
        for p in planned
        if p.module == label and p.role not in (Role.PASS_DUMP, Role.MOSAIC)
    }


def jaxpr_inline(stage: Path | None, planned: Sequence[Planned], label: str) -> tuple[str, str]:
    """(member name, text) of the module's jaxpr, for ISSUE.md to show when it is short."""
    found = files_by_role(planned, label).get(Role.JAXPR.value)
    if stage is None or found is None:
        return "", ""
    body = (stage / found).read_text("utf-8", "replace")
    if len(body.rstrip("\n").splitlines()) > INLINE_JAXPR_LINES:
        return found, ""
    return found, body
