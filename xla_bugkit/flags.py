"""XLA_FLAGS handling: keep the user's flags, add the dump flags, report every conflict."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# What collect asks XLA to write. Large constants matter: without them a text dump elides
# big literals and cannot be replayed.
DUMP_FORMAT_FLAGS = (
    "--xla_dump_hlo_as_text",
    "--xla_dump_hlo_as_proto",
    "--xla_dump_hlo_snapshots",
    "--xla_dump_large_constants",
)
# Flags that only steer dumping; a replay drops them (it must not dump into the bundle).
_DUMP_PREFIXES = ("--xla_dump_",)


def split(value: str | None) -> list[str]:
    """Split an XLA_FLAGS value the way XLA does: on whitespace, honouring quotes."""
    if not value:
        return []
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def join(flags: Sequence[str]) -> str:
    # XLA reads quotes only after the "=": --xla_dump_to='/a b', not '--xla_dump_to=/a b'.
    return " ".join(_quote_value(f) for f in flags)


def _quote_value(flag: str) -> str:
    name, sep, value = flag.partition("=")
    return f"{name}={shlex.quote(value)}" if sep and " " in value else flag


def name_of(flag: str) -> str:
    """``--xla_dump_to=/x`` -> ``--xla_dump_to``; ``--noxla_foo`` stays as it is."""
    return flag.split("=", 1)[0]


def value_of(flag: str) -> str | None:
    return flag.split("=", 1)[1] if "=" in flag else None


# What XLA prints (then aborts) when XLA_FLAGS holds a flag it does not know.
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: *(--?\S+)")


def unknown_flag(output: str) -> str | None:
    """The name of the flag XLA refused as unknown in a process's ``output``, if it did."""
    found = _UNKNOWN.search(output)
    return None if found is None else name_of(found.group(1))


@dataclass(frozen=True)
class MergedFlags:
    """The child's XLA_FLAGS, and what happened to the user's own flags on the way."""

    flags: tuple[str, ...]
    user_flags: tuple[str, ...]
    notes: tuple[str, ...]  # one line each, shown to the user and kept in the manifest

    @property
    def value(self) -> str:
        return join(self.flags)


def merge(user_value: str | None, dump_dir: Path) -> MergedFlags:
    """The user's flags kept, in order, followed by the dump flags for ``dump_dir``.

    A user's own ``--xla_dump_to`` is replaced for this run only (their environment is not
    changed) and reported; a module filter they set is kept, with a warning that it can hide
    the failing module.
    """
    user = split(user_value)
    ours = [f"--xla_dump_to={dump_dir}", *DUMP_FORMAT_FLAGS]
    forced = {name_of(f) for f in ours}
    kept: list[str] = []
    notes: list[str] = []
    for flag in user:
        name = name_of(flag)
        if name == "--xla_dump_to":
            notes.append(
                f"your {flag} is replaced by the bundle's work dir for this run "
                "(your environment is unchanged)"
            )
        elif name in forced:
            if value_of(flag) not in (None, "true", "1"):
                notes.append(f"your {flag} is overridden: collect needs {name}=true")
        else:
            if name == "--xla_dump_hlo_module_re":
                notes.append(f"your {flag} is kept: it may keep the failing module out of the dump")
            kept.append(flag)
    return MergedFlags(tuple(kept + ours), tuple(user), tuple(notes))


def without_dump_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The flags a replay should use: everything but the dump flags."""
    return tuple(f for f in flags if not name_of(f).startswith(_DUMP_PREFIXES))


# DebugOptions fields that JAX sets per compilation and that have no command-line flag;
# passing them back through XLA_FLAGS would stop the replay with "unknown flag".
_NOT_FLAGS = frozenset({"xla_detailed_logging", "xla_enable_dumping"})


def from_debug_options(text: str) -> tuple[str, ...]:
    """Flags equivalent to a dumped ``debug_options`` file (text DebugOptions in force).

    This is how a replay learns the flags a program added to XLA_FLAGS itself. Dump flags are
    left out; repeated fields and sub-messages have no single flag and are skipped.
    """
    values: dict[str, list[str]] = {}
    depth = 0  # inside a sub-message or map entry (``name: {`` ... ``}``): no flag spells it
    for line in text.splitlines():
        if depth:
            depth += line.count("{") - line.count("}")
            continue
        name, sep, value = line.partition(": ")
        name, value = name.strip(), value.strip()
        if value.startswith("{") or (not sep and line.rstrip().endswith("{")):
            depth = line.count("{") - line.count("}")
            continue
        if not sep or not name.startswith("xla_") or name in _NOT_FLAGS:
            continue
        if value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        values.setdefault(name, []).append(value)
    # A repeated field is printed once per element; its flag takes a comma-separated list.
    return without_dump_flags([f"--{name}={','.join(v)}" for name, v in values.items()])


def in_force(recorded: Sequence[str], process: Sequence[str]) -> tuple[str, ...]:
    """A module's ``recorded`` flags (its dumped debug options), then the flags of the
    process that compiled it that those cannot spell: a flag set to an empty value or to a
    proto default, a map such as ``--xla_backend_extra_options``, a start-up flag. Where
    both name a flag, the module's own record wins (a per-compile override may differ)."""
    names = {name_of(f) for f in recorded}
    extra = [f for f in without_dump_flags(process) if name_of(f) not in names]
    return (*recorded, *extra)
