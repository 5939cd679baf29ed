"""What the report says of another framework's module: the framework, where its replay ran,
and what its inputs are."""

from __future__ import annotations

from xla_bugkit.frameworks import (
    HERE,
    Framework,
    FrameworkEntry,
    FrameworkInfo,
    installed_version,
    of_record,
)
from xla_bugkit.run.adapt import SNAPSHOT_FLAG


def describe(found: FrameworkInfo, replayed: bool, label: str | None = None) -> str | None:
    """A paragraph for ISSUE.md: the framework, and what a jaxlib replay of its module is
    (None for JAX, whose versions the system info shows); ``label``: where the replay ran,
    when not only under jaxlib (``native.replay_label``)."""
    if found.name is Framework.JAX:
        return None
    revision = f" ({found.revision})" if found.revision else ""
    if found.version_from == HERE:
        revision += " as installed where xla-bugkit ran (the program's own was not recorded)"
    lines = [f"Framework: {found.describe}{revision}, detected from {found.detected_from}."]
    label = label or (replay_label(found) if replayed else None)
    if label:
        lines.append(f"The bundle's replay ran {label}.")
    return " ".join(lines)


def replay_label(found: FrameworkInfo) -> str | None:
    """ "under jaxlib 0.10.2, not TensorFlow's own XLA" for another framework's module: the
    two XLAs differ in version, so one may show a bug the other does not."""
    if found.name is Framework.JAX:
        return None
    jaxlib = installed_version(Framework.JAX)
    version = f" {jaxlib}" if jaxlib else ""
    return f"under jaxlib{version}, not {found.name.display}'s own XLA"


def inputs_text(found: FrameworkInfo | None, recorded: str) -> str:
    """The manifest's ``data`` line, saying plainly that inputs are generated when the
    framework left XLA no way to record them."""
    if found is None or found.name is Framework.JAX:
        return recorded
    if recorded.startswith("real inputs (recorded by the capture hook"):
        why = f"{found.name.display} writes no snapshot on CPU"
        return f"real inputs (recorded by the capture hook: {why})"
    if not recorded.startswith("no real inputs"):
        return recorded
    why = "writes no snapshots of the inputs on CPU"
    if found.name is Framework.TENSORFLOW:
        why = f"runs without {SNAPSHOT_FLAG} (it crashes), and the hook saved no inputs"
    from xla_bugkit.hlo.generated import SEED  # numpy: not before the program starts

    return f"generated inputs (seed {SEED}): {found.name.display} {why}"


def replay_label_of(record: FrameworkEntry | None) -> str | None:
    """``replay_label`` for a manifest's record."""
    framework = of_record(record)
    if framework is None or record is None:
        return None
    found = FrameworkInfo(framework, record["version"], record["revision"], "")
    return replay_label(found)
