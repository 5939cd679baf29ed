"""Index an XLA dump directory into modules, from file names alone.

Dump trees of real programs hold thousands of modules; indexing lists names and sizes
(one ``scandir`` pass) and never opens a file.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Role(StrEnum):
    """What a dump file is, for a bug report."""

    BEFORE_TEXT = "before_optimizations.txt"
    BEFORE_PROTO = "before_optimizations.hlo.pb"
    AFTER_TEXT = "after_optimizations.txt"
    AFTER_PROTO = "after_optimizations.hlo.pb"
    BUFFER_ASSIGNMENT = "buffer-assignment"
    BUFFER_VALUES = "buffer-assignment-values"
    LIVE_RANGE = "live-range"
    MEMORY_REPORT = "memory-usage-report"
    DEBUG_OPTIONS = "debug_options"
    SNAPSHOT = "snapshot"
    # One process's shards of a call over several processes' devices (``run.shards``).
    SHARDS = "shards"
    PASS_DUMP = "pass dump"
    JAXPR = "jaxpr"  # the function as JAX traced it (JAX_DUMP_IR_TO), kept beside the dump
    GPU_TARGET = "gpu_target_config.pbtxt"  # the GPU compiled for: lets another machine do it
    AUTOTUNE = "autotune_results.pbtxt"  # the kernels chosen: a GPU compile is repeatable
    BACKEND = "backend"  # LLVM IR, object files, PTX, cubin, autotuning
    PJRT_MLIR = "module.mlir"
    COMPILE_OPTIONS = "compile_options.pb"
    TOPOLOGY = "topology.pb"
    # The TPU compiler's environment (module_NNNN.NAME.tpu_comp_env.txt): written only by a
    # TPU compile, whose other dump names carry no platform prefix.
    TPU_ENV = "tpu_comp_env.txt"
    MOSAIC = "mosaic dump"  # a Pallas kernel after one Mosaic pass (``choose.mosaic``)
    OTHER = "other"


# The module prefix: optional microsecond timestamp, then module_NNNN.
# A dumped text file larger than this is left unread when the chooser searches one (a module's
# text for its kernels, a buffer assignment for an allocation): no real one comes near it.
TEXT_READ_LIMIT = 64 << 20

_PREFIX = re.compile(r"^(?:(?P<ts>\d+)\.)?module_(?P<id>\d+)\.(?P<rest>.+)$")
# "cpu_", "gpu_", "sm_9.0_gpu_" or nothing; a dotted module name must not be taken for it.
_AFTER = r"(?P<platform>(?:(?:sm_\d+\.\d+_)?[A-Za-z]\w*_)?)after_optimizations"
# Suffix patterns, most specific first; each leaves the module name in front of it.
_SUFFIXES: tuple[tuple[Role, re.Pattern[str]], ...] = tuple(
    (role, re.compile(rf"^(?P<name>.+?)\.{pattern}$"))
    for role, pattern in (
        (Role.BEFORE_TEXT, r"before_optimizations\.txt"),
        (Role.BEFORE_PROTO, r"before_optimizations\.hlo\.pb(?:\.gz)?"),
        (Role.BUFFER_VALUES, rf"{_AFTER}-buffer-assignment-values\.txt"),
        (Role.BUFFER_ASSIGNMENT, rf"{_AFTER}-buffer-assignment\.txt"),
        (Role.LIVE_RANGE, rf"{_AFTER}-live-range\.txt"),
        (Role.MEMORY_REPORT, rf"{_AFTER}-memory-usage-report\.(?:txt|pb)"),
        (Role.AFTER_TEXT, rf"{_AFTER}\.txt"),
        (Role.AFTER_PROTO, rf"{_AFTER}\.hlo\.pb(?:\.gz)?"),
        (Role.DEBUG_OPTIONS, r"debug_options"),
        (Role.GPU_TARGET, r"gpu_target_config\.pbtxt"),
        (Role.AUTOTUNE, r"autotune_results\.pbtxt"),
        (Role.TPU_ENV, r"tpu_comp_env\.txt"),
        (Role.SHARDS, r"snapshot\.shards-\d+\.pb"),  # run/shards.py
        # snapshot.recorded-N.pb: written from the hook's saved arguments (capture/arguments.py)
        (
            Role.SNAPSHOT,
            r"(?:snapshot\.(?:-?\d+|recorded-\d+)\.pb"
            r"|execution_\d+\.hlo_snapshot\.pb)",
        ),
        (Role.PASS_DUMP, r"\d{4}\.[\w.-]+\.(?:before|after)_[\w.-]+\.(?:txt|hlo\.pb(?:\.gz)?)"),
    )
)
_BACKEND = re.compile(r"\.(?:ll|o|ptx|cubin|s|asm|mlir)$|autotun|obj-file|\.thunk_sequence", re.I)
_PJRT_FILES = {
    "module.mlir": Role.PJRT_MLIR,
    "compile_options.pb": Role.COMPILE_OPTIONS,
    "topology.pb": Role.TOPOLOGY,
}


class DumpFile:
    """One dump file: its ``path`` relative to the dump root, ``role``, ``size``, ``platform``
    ("cpu", "gpu", "sm_9.0_gpu", "" for generic or not an after-optimizations file), ``mtime``.

    A tree of a long run holds 100k+ of these: slots and the path kept as its text (a
    ``Path`` is made on access) hold the index to about a third of a dataclass of Paths.
    Immutable, and equal when all fields are, like a frozen dataclass.
    """

    __slots__ = ("mtime", "platform", "rel", "role", "size")
    rel: str  # ``path`` as text, "/"-separated
    role: Role
    size: int
    platform: str
    mtime: float

    def __init__(
        self, path: Path | str, role: Role, size: int, platform: str = "", mtime: float = 0.0
    ) -> None:
        set_ = object.__setattr__
        set_(self, "rel", path if isinstance(path, str) else str(path))
        set_(self, "role", role)
        set_(self, "size", size)
        set_(self, "platform", sys.intern(platform))
        set_(self, "mtime", mtime)

    @property
    def path(self) -> Path:
        """Relative to the dump root."""
        return Path(self.rel)

    @property
    def name(self) -> str:
        """The file name (``path.name`` without making a Path)."""
        return self.rel.rpartition("/")[2]

    def _key(self) -> tuple[str, Role, int, str, float]:
        return (self.rel, self.role, self.size, self.platform, self.mtime)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DumpFile is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DumpFile) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"DumpFile(path={self.path!r}, role={self.role!r}, size={self.size!r}, "
            f"platform={self.platform!r}, mtime={self.mtime!r})"
        )


@dataclass(frozen=True, slots=True)
class DumpModule:
    """All files XLA wrote for one module; one jitted function may span two ids."""

    id: int
    name: str
    files: tuple[DumpFile, ...]

    @property
    def label(self) -> str:
        return f"module_{self.id:04d}.{self.name}"

    def first(self, role: Role) -> DumpFile | None:
        return next((f for f in self.files if f.role is role), None)

    def all(self, role: Role) -> list[DumpFile]:
        return [f for f in self.files if f.role is role]

    @property
    def newest_snapshot(self) -> DumpFile | None:
        """The snapshot of the latest execution: the one closest to a failure."""
        snaps = self.all(Role.SNAPSHOT)
        return max(snaps, key=lambda f: (f.mtime, f.rel)) if snaps else None

    @property
    def compiled(self) -> bool:
        """XLA finished optimising it (a compile that dies part-way leaves no after files)."""
        return any(f.role in (Role.AFTER_TEXT, Role.AFTER_PROTO) for f in self.files)

    @property
    def platform(self) -> str:
        return next((f.platform for f in self.files if f.platform), "")

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True, slots=True)
class DumpIndex:
    root: Path
    modules: tuple[DumpModule, ...]  # in id order, which is compile order
    stray: tuple[DumpFile, ...]  # files outside any module (Mosaic dumps, unknown names)

    def by_label(self, label: str) -> DumpModule | None:
        return next((m for m in self.modules if m.label == label), None)

    @property
    def file_count(self) -> int:
        return sum(len(m.files) for m in self.modules) + len(self.stray)


def _walk(root: Path) -> Iterator[tuple[tuple[str, ...], int, float]]:
    """Every regular file under ``root`` as (relative path parts, size, mtime).

    Parts are plain strings: building Path objects for 100k names costs more than the rest
    of indexing. Symlinks are not followed.
    """
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, parts = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, (*parts, entry.name)))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    yield (*parts, entry.name), st.st_size, st.st_mtime


def _classify(rest: str) -> tuple[Role, str, str] | None:
    """(role, module name, platform) for a file name after ``module_NNNN.``."""
    for role, pattern in _SUFFIXES:
        m = pattern.match(rest)
        if m:
            platform = (m.groupdict().get("platform") or "").rstrip("_")
            return role, m.group("name"), "tpu" if role is Role.TPU_ENV else platform
    return None


def index(root: Path) -> DumpIndex:
    """Group every file under ``root`` into modules keyed by (id, name)."""
    known: dict[tuple[int, str], list[DumpFile]] = defaultdict(list)
    pending: list[tuple[int, str, DumpFile]] = []  # names we can only resolve at the end
    stray: list[DumpFile] = []
    bundled: list[DumpFile] = []  # PJRT files of a bundle's module folder, indexed at its root
    for parts, size, mtime in _walk(root):
        rel = "/".join(parts)  # a Path per file would cost more than the rest of indexing
        where = _bundle_layout(parts)
        if where is not None:  # an unpacked bundle's modules/module_NNNN.NAME/[pjrt/]FILE
            if isinstance(where, str):  # "pjrt"
                role = _PJRT_FILES.get(parts[-1], Role.OTHER)
                bundled.append(DumpFile(rel, role, size, mtime=mtime))
                continue
            parts = where
        m = _PREFIX.match(parts[0])
        if m is None or len(parts) > 2:
            stray.append(DumpFile(rel, Role.OTHER, size, mtime=mtime))
            continue
        mod_id, rest = int(m.group("id")), m.group("rest")
        if len(parts) == 2:  # the PJRT folder module_NNNN.NAME/ names the module exactly
            role = _PJRT_FILES.get(parts[1], Role.OTHER)
            known[(mod_id, rest)].append(DumpFile(rel, role, size, mtime=mtime))
            continue
        # LLVM IR and objects are half of a CPU dump and match no stage suffix.
        found = None if rest.endswith((".ll", ".o")) else _classify(rest)
        if found is None:
            pending.append((mod_id, rest, DumpFile(rel, Role.OTHER, size, mtime=mtime)))
            continue
        role, name, platform = found
        known[(mod_id, name)].append(DumpFile(rel, role, size, platform, mtime))
    if bundled and len(known) == 1:  # the folder of one bundled module: its PJRT files
        known[next(iter(known))].extend(bundled)
    else:
        stray.extend(bundled)
    names_by_id: dict[int, list[str]] = defaultdict(list)
    for mod_id, name in known:
        names_by_id[mod_id].append(name)
    for mod_id, rest, file in pending:
        known[(mod_id, _owner_name(rest, names_by_id[mod_id]))].append(_backend_role(file))
    modules = tuple(
        DumpModule(mod_id, name, tuple(sorted(files, key=lambda f: f.rel)))
        for (mod_id, name), files in sorted(known.items())
    )
    return DumpIndex(root, _paired(modules), tuple(stray))


_BEFORE_ROLES = (Role.BEFORE_TEXT, Role.BEFORE_PROTO)


def _paired(modules: tuple[DumpModule, ...]) -> tuple[DumpModule, ...]:
    """``modules`` (in id order) with each module that has after-optimizations files but
    no before-optimizations ones joined to the module of its name dumped before it with
    only before-optimizations ones: one compile, dumped under two numbers. The TPU compiler
    does so for some modules (seen on a v5e, libtpu 0.0.42.1: ``module_0052.jit__normal``
    with its before-optimizations files, debug options and PJRT folder, then
    ``module_0055.jit__normal`` with its after-optimizations files, buffer assignment and
    codegen). Joined, the module is one: compiled, replayable, its files bundled together
    under the first number, which is the one a compile's record is matched to
    (``run.module_ids``, by the before-optimizations files). A module of the name with
    before-optimizations files in between ends the wait: a compile that did not finish
    stays so."""
    joined: list[DumpModule] = []
    waiting: dict[str, int] = {}  # name -> where in ``joined`` its before-only module is
    for m in modules:
        before = any(f.role in _BEFORE_ROLES for f in m.files)
        if not before and m.compiled and m.name in waiting:
            at = waiting.pop(m.name)
            first = joined[at]
            files = tuple(sorted((*first.files, *m.files), key=lambda f: f.rel))
            joined[at] = DumpModule(first.id, first.name, files)
            continue
        if before:
            waiting.pop(m.name, None)
            if not m.compiled:
                waiting[m.name] = len(joined)
        joined.append(m)
    return tuple(joined)


def _bundle_layout(parts: tuple[str, ...]) -> tuple[str, ...] | str | None:
    """Where a file of an unpacked bundle's ``modules/`` goes, indexed from the bundle's
    root, from ``modules/`` or from one module's folder: its own dump name (as if in a plain
    dump folder), ``(module_NNNN.NAME, FILE)`` for a PJRT file of a named module, or "pjrt"
    for a PJRT file of the module whose folder is the root. None: a plain dump's file."""
    if parts[0] == "modules" and len(parts) > 2:
        parts = parts[1:]
    if len(parts) >= 2 and parts[-2] == "pjrt":
        if len(parts) == 2:
            return "pjrt"
        return (parts[0], parts[2]) if len(parts) == 3 and _PREFIX.match(parts[0]) else None
    if len(parts) == 2 and _PREFIX.match(parts[0]) and _PREFIX.match(parts[1]):
        return (parts[1],)  # module_NNNN.NAME/module_NNNN.NAME.before_optimizations.txt
    return None


def _owner_name(rest: str, names: list[str]) -> str:
    """The longest known module name that prefixes ``rest``; else its first dotted part."""
    fits = [n for n in names if rest.startswith(n + ".")]
    return max(fits, key=len) if fits else rest.split(".", 1)[0]


def _backend_role(file: DumpFile) -> DumpFile:
    if _BACKEND.search(file.name):
        return DumpFile(file.rel, Role.BACKEND, file.size, mtime=file.mtime)
    return file


# XLA reports a dump it could not write, then goes on: the file on disk is cut short.
_WRITE_FAILED = re.compile(
    r"(?:Could not write XLA debug data to (?P<a>\S+?)|Failed to dump compile inputs: "
    r"[A-Z_]+: (?P<b>\S+?));? .*?(?P<why>[^;:\n]+)$",
    re.M,
)


def failed_writes(output: str) -> dict[Path, str]:
    """Dump files XLA says it could not write (disk full, file-size limit), with the reason."""
    found: dict[Path, str] = {}
    for m in _WRITE_FAILED.finditer(output):
        path = (m.group("a") or m.group("b")).rstrip(":;")
        found[Path(path)] = m.group("why").strip()
    return found


def without(index: DumpIndex, broken: Iterable[Path]) -> DumpIndex:
    """``index`` less the files in ``broken`` (absolute paths): half-written files mislead."""
    drop = {p.resolve() for p in broken}
    if not drop:
        return index
    modules = []
    for m in index.modules:
        files = tuple(f for f in m.files if (index.root / f.path).resolve() not in drop)
        if files:
            modules.append(DumpModule(m.id, m.name, files))
    stray = tuple(f for f in index.stray if (index.root / f.path).resolve() not in drop)
    return DumpIndex(index.root, tuple(modules), stray)


# Modules JAX compiles for single primitives (jnp helpers, dispatch of one op). They are in
# every dump and are almost never the bug, so they rank below the user's own functions.
# A table: laid out by hand (the formatter would give each name a line of its own).
HELPER_NAMES = frozenset(
    {
        "convert_element_type", "broadcast_in_dim", "reshape", "iota", "concatenate",
        "squeeze", "expand_dims", "transpose", "_where", "where", "clip", "_reduce_sum",
        "_reduce_max", "_reduce_min", "_multi_slice", "_unstack", "dynamic_slice",
        "dynamic_update_slice", "gather", "scatter", "select_n", "add", "mul", "sub",
        "div", "neg", "integer_pow", "pow", "exp", "log", "sqrt", "copy", "copy_p",
        "random_bits", "random_seed", "random_wrap", "random_unwrap", "threefry2x32",
        "_uniform", "_normal", "_split", "_fold_in", "eq", "ne", "lt", "gt", "le", "ge",
        "max", "min", "abs", "sign", "floor", "ceil", "round", "dot_general", "cumsum",
        "sort", "argmax", "argmin", "_identity_fn", "zeros_like", "full", "_full",
        "reduce_sum", "reduce_max", "reduce_min", "equal", "not_equal", "stage", "less",
        "greater", "multiply", "subtract", "true_divide", "divide", "square", "isnan",
        "mean", "var", "std", "sum", "prod", "average", "nanmean", "nansum", "argsort",
    }
)  # fmt: skip


def is_helper(module: DumpModule) -> bool:
    """Whether JAX compiled ``module`` for one primitive (``HELPER_NAMES``)."""
    bare = re.sub(r"^(?:jit|pmap|xla_pmap)_", "", module.name)
    return bare in HELPER_NAMES or bare.lstrip("_") in HELPER_NAMES


def loose_name(name: str) -> str:
    """Compare JAX names and module names loosely: ``<lambda>`` is dumped as ``jit__lambda``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())
