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
# How many devices XLA's CPU client pretends to have (read when the client starts).
HOST_DEVICE_COUNT = "--xla_force_host_platform_device_count"
SNAPSHOTS = "--xla_dump_hlo_snapshots"  # a snapshot (arguments, result) of every execution
# Flags that only steer dumping; a replay drops them (it must not dump into the bundle).
_DUMP_PREFIXES = ("--xla_dump_",)
# Flags that make XLA read and write a cache of the user's (GPU autotune results per fusion,
# compiled kernels; the autotune cache's mode means nothing without its folder). The run
# leaves them out: a hit skips the work that fails, and the user's cache stays as it was.
# The start-up hook keeps its own copy (``run/hook/caches.py``), for flags a program sets.
CACHE_FLAGS = (
    "--xla_gpu_per_fusion_autotune_cache_dir",
    "--xla_gpu_kernel_cache_file",
    "--xla_gpu_experimental_autotune_cache_mode",
)


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


# XLA's own flag for dumping the module around each pass whose name matches its regex.
PASS_RE = "--xla_dump_hlo_pass_re"


def merge(
    user_value: str | None,
    dump_dir: Path,
    *,
    snapshots: bool = True,
    pass_re: str | None = None,
) -> MergedFlags:
    """The user's flags kept, in order, followed by the dump flags for ``dump_dir``
    (``snapshots``: with XLA's snapshot of every execution; a user's own asking for it then
    is kept, since they asked; ``pass_re``: with the module dumped around each pass whose
    name it matches, ``--xla_dump_hlo_pass_re``).

    A user's own ``--xla_dump_to`` is replaced for this run only (their environment is not
    changed) and reported, as is a cache of XLA's they named (``CACHE_FLAGS``), left out; a
    module filter they set is kept, with a warning that it can hide the failing module.
    """
    user = split(user_value)
    formats = [f for f in DUMP_FORMAT_FLAGS if snapshots or f != SNAPSHOTS]
    ours = [f"--xla_dump_to={dump_dir}", *formats]
    if pass_re is not None:
        ours.append(f"{PASS_RE}={pass_re}")
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
        elif f"--{canonical(flag)[0]}" in CACHE_FLAGS:
            notes.append(cache_flag_note(flag))
        elif name in forced:
            if value_of(flag) not in (None, "true", "1"):
                notes.append(f"your {flag} is overridden: collect needs {name}=true")
        else:
            if name == "--xla_dump_hlo_module_re":
                notes.append(f"your {flag} is kept: it may keep the failing module out of the dump")
            kept.append(flag)
    return MergedFlags(tuple(kept + ours), tuple(user), tuple(notes))


def cache_flag_note(flag: str) -> str:
    """What the run says of a cache flag of XLA's it left out (``CACHE_FLAGS``)."""
    return (
        f"{flag} is left out of the run's XLA_FLAGS: XLA neither read nor wrote that cache "
        "(your files are as they were)"
    )


def without_dump_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The flags of a run without those that only steer dumping (what collect records)."""
    return tuple(f for f in flags if not name_of(f).startswith(_DUMP_PREFIXES))


# What a replay may apply of the options a bundle carries: the bundle comes from a stranger,
# and an option that names a file makes XLA read or write it (a dump folder, an autotune or
# kernel cache, PTX to load, ptxas or LLVM options with an output file). Rather than list
# those (XLA adds some every release), an option is applied only when its value cannot spell
# a path: a boolean, a number, or a list of words; and its name does not say it is about a
# file. Names are normalised first: XLA reads one dash or two, and ``--noxla_foo``.
_OPTION_NAME = re.compile(r"xla_[a-z0-9_]+")
_WORDS = re.compile(r"[A-Za-z0-9_+,:-]*")  # no "/", "\", ".", "~", "$", quotes, spaces
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
# Words of an option's name that say it is about files (a map of backend options, ptxas's
# flags: either can name an output file); "to"/"from" end the names of the others.
_FILE_WORDS = frozenset(
    {"dump", "dumping", "file", "filename", "dir", "directory", "path", "cache", "extra", "url"}
)
_FILE_ENDS = frozenset({"to", "from"})
_MAX_VALUE = 1000


def canonical(flag: str) -> tuple[str, str | None]:
    """``flag``'s option name without dashes and ``no`` prefix, and its value (None: the
    bare flag, which turns a boolean on): ``-noxla_foo`` -> ("xla_foo", "false")."""
    name, sep, value = flag.partition("=")
    for dashes in ("--", "-"):
        if name.startswith(dashes):
            name = name[len(dashes) :]
            break
    if not sep and name.startswith("noxla_"):
        return name[2:], "false"
    return name, value if sep else None


# Options whose value is a map, ``key[=value],...``: each entry is judged as an option.
_MAP_OPTIONS = frozenset({"xla_backend_extra_options"})  # LLVM's own options


def refusal(name: str, value: str | None) -> str | None:
    """Why the option ``name`` (canonical) set to ``value`` may not be applied by a replay
    of someone else's module; None when it may."""
    if not _OPTION_NAME.fullmatch(name):
        return "not an XLA option"
    if name in _MAP_OPTIONS and value is not None and len(value) <= _MAX_VALUE:
        entries = (entry.partition("=") for entry in value.split(","))
        return next(filter(None, (_refused(k, v if sep else None) for k, sep, v in entries)), None)
    return _refused(name, value)


def _refused(name: str, value: str | None) -> str | None:
    words = name.replace("-", "_").split("_")
    if _FILE_WORDS.intersection(words) or words[-1] in _FILE_ENDS or "output" in words:
        return "it is about files"
    if value is not None and (
        len(value) > _MAX_VALUE or not (_WORDS.fullmatch(value) or _NUMBER.fullmatch(value))
    ):
        return "its value could name a file"
    if not _WORDS.fullmatch(name):
        return "its value could name a file"
    return None


@dataclass(frozen=True)
class Admitted:
    """The recorded options a replay applies (canonical ``--name=value``), and those it
    leaves out, as recorded, each with the reason."""

    flags: tuple[str, ...]
    withheld: tuple[str, ...] = ()


def admit(recorded: Sequence[str]) -> Admitted:
    """The options of ``recorded`` (flags as written in XLA_FLAGS, a ``debug_options`` file
    or a manifest) that a replay may apply, in canonical form; the rest withheld."""
    kept: list[str] = []
    withheld: list[str] = []
    for flag in recorded:
        name, value = canonical(flag)
        why = refusal(name, value)
        if why is not None:
            withheld.append(f"{flag[:200]} ({why})")
        else:
            kept.append(f"--{name}" if value is None else f"--{name}={value}")
    return Admitted(tuple(kept), tuple(withheld))


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


# The TPU compiler's own flags: libtpu reads them from this variable at start-up, not from
# XLA_FLAGS (``--xla_tpu_*``, ``--xla_jf_*``, ``--xla_mosaic_*``), and ends the process on
# one it does not own.
TPU_ENV = "LIBTPU_INIT_ARGS"
# More flags than any real run sets: a manifest's list beyond it is not applied at all.
MAX_TPU_ARGS = 200
# What jax adds to LIBTPU_INIT_ARGS by itself as it starts the TPU backend, in every program
# (its cloud_tpu_init): seen in the process's environment after that, not a setting of the
# run.
JAX_OWN_TPU_ARGS = frozenset({"--xla_tpu_use_enhanced_launch_barrier=true"})


def mosaic_dump_flag(dump_dir: Path) -> str:
    """collect's own LIBTPU_INIT_ARGS flag: Mosaic's dumps into ``dump_dir``'s ``mosaic``."""
    return f"--xla_mosaic_dump_to={dump_dir / 'mosaic'}"


def tpu_args(value: str | None) -> tuple[str, ...]:
    """A LIBTPU_INIT_ARGS value as flags, split as XLA_FLAGS is (``split``)."""
    return tuple(split(value))


def admit_tpu(recorded: Sequence[str]) -> Admitted:
    """The recorded LIBTPU_INIT_ARGS flags a replay on a TPU may apply: ``admit``'s rule
    (none that names or writes a file: ``--xla_jf_dump_to``, ``--xla_mosaic_dump_to``), each
    withheld one said with ``LIBTPU_INIT_ARGS`` before it; past ``MAX_TPU_ARGS`` none."""
    if len(recorded) > MAX_TPU_ARGS:
        return Admitted((), (f"{TPU_ENV}: all {len(recorded)} flags (over {MAX_TPU_ARGS})",))
    admitted = admit(recorded)
    return Admitted(admitted.flags, tuple(f"{TPU_ENV} {w}" for w in admitted.withheld))
