"""Lay out a bundle: which dump files go in, under what names, what is dropped first to fit a
size budget, and the staging folder they are copied into."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import archive
from xla_bugkit.bundle import members
from xla_bugkit.choose import mosaic
from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.choose.snapshot import replay_snapshot
from xla_bugkit.hlo.names import program_name
from xla_bugkit.redact import Redactor, left_note
from xla_bugkit.run.hook import JAXPRS

# What a maintainer needs of each chosen module (XLA's docs: before, after, buffer assignment),
# plus what replay needs. Live ranges, buffer values, LLVM IR and objects stay behind: large,
# and rebuilt by any replay.
KEPT_ROLES = (
    Role.BEFORE_TEXT,
    Role.BEFORE_PROTO,
    Role.AFTER_TEXT,
    Role.AFTER_PROTO,
    Role.BUFFER_ASSIGNMENT,
    Role.MEMORY_REPORT,
    Role.DEBUG_OPTIONS,
    Role.PJRT_MLIR,
    Role.COMPILE_OPTIONS,
    Role.TOPOLOGY,
    Role.GPU_TARGET,
    Role.AUTOTUNE,
    Role.MOSAIC,
)
# Text files are redacted on the way in; binary protos field by field (redact.binary).
_TEXT_SUFFIXES = (".txt", ".mlir", ".md", ".log", ".json", ".pbtxt")
_TEXT_ROLES = (Role.DEBUG_OPTIONS,)


@dataclass(frozen=True)
class Planned:
    source: Path
    arcname: str
    role: Role
    module: str  # module label


def plan(index: DumpIndex, chosen: Sequence[Chosen], *, data: bool = True) -> list[Planned]:
    """The dump files that go into the bundle, each with its name inside the archive."""
    planned: list[Planned] = []
    kernels = mosaic.dumps_of(index, [c.module for c in chosen])
    for c in chosen:
        m = c.module
        files = [f for f in m.files if f.role in KEPT_ROLES]
        snapshot = replay_snapshot(index.root, m) if data else None
        for f in [*files, *([snapshot] if snapshot else [])]:
            sub = "pjrt/" if len(f.path.parts) == 2 else ""
            arcname = members.module_member(m.label, f"{sub}{f.path.name}")
            planned.append(Planned(index.root / f.path, arcname, f.role, m.label))
        # Pass dumps (--dump-passes) as text: what a maintainer reads; in the order dumped.
        for f in sorted(
            (f for f in m.files if f.role is Role.PASS_DUMP and f.path.suffix == ".txt"),
            key=lambda f: f.path.name,
        ):
            arcname = members.module_member(m.label, f"{PASSES}/{f.path.name}")
            planned.append(Planned(index.root / f.path, arcname, f.role, m.label))
        for path in jaxprs_of(index, m):
            # JAX names the file by the function, as written: jax_000002_<lambda>.jaxpr.txt
            arcname = members.module_member(m.label, re.sub(r"[^\w.-]", "_", path.name))
            planned.append(Planned(path, arcname, Role.JAXPR, m.label))
        # Its Pallas kernels as Mosaic dumped them, pass by pass, in the order written.
        for path in kernels.get(m.label, ()):
            arcname = members.module_member(m.label, f"{mosaic.FOLDER}/{path.name}")
            planned.append(Planned(path, arcname, Role.MOSAIC, m.label))
    if data:
        planned += _shards(index)
    return planned


def _shards(index: DumpIndex) -> list[Planned]:
    """A job's part: this process's shards of each module run over several processes'
    devices, whether chosen here or not (the module the job's failure is judged by may be
    another part's, and merge stitches its inputs from every part's): those of its first
    call and of its newest, the two the start-up hook keeps (``hook.shards``)."""
    planned = []
    for m in index.modules:
        for kept in sorted(m.all(Role.SHARDS), key=lambda f: (f.mtime, f.rel)):
            arcname = f"{members.SHARDS}/{kept.path.name}"
            planned.append(Planned(index.root / kept.path, arcname, Role.SHARDS, m.label))
    return planned


# JAX's name for a jaxpr it dumps: jax_<lowering number>_<function>.jaxpr.txt
_JAXPR = re.compile(r"jax_(?P<n>\d+)_(?P<function>.+)\.jaxpr\.txt")
_NEWEST_JAXPRS = 3  # when lowerings and compiles do not pair up, the newest of a name


def _words(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_")


def jaxprs_of(index: DumpIndex, module: DumpModule) -> list[Path]:
    """The jaxpr JAX dumped as it lowered ``module`` (``jit_f``: the function ``f``). A
    function lowered and compiled N times gives N of each, paired in order; when the counts
    differ, the newest few of its name."""
    folder = index.root / JAXPRS
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    # After the API's prefix (jit, pmap); a TPU's module names end with the compiler's build.
    function = _words(program_name(module.name)).partition("_")[2]
    found = sorted(
        (int(m["n"]), folder / name)
        for name in names
        if (m := _JAXPR.fullmatch(name)) and _words(m["function"]) == function
    )
    namesakes = [m for m in index.modules if m.name == module.name]
    if found and len(found) == len(namesakes):
        return [found[namesakes.index(module)][1]]
    return [path for _, path in found[-_NEWEST_JAXPRS:]]


PASSES = "passes"  # the folder of a module's pass dumps in the bundle


# What goes first when a bundle is over its size budget: what a maintainer misses least.
_EXTRA_ROLES = (
    Role.MEMORY_REPORT,
    Role.AFTER_PROTO,
    Role.TOPOLOGY,
    Role.COMPILE_OPTIONS,
    Role.JAXPR,
    Role.AUTOTUNE,
)


def drop_order(planned: Sequence[Planned]) -> list[Planned]:
    """Planned files in the order they are dropped to meet a size budget.

    First the extra files of every module but the first chosen, then pass dumps (the other
    modules' first), those dumped earliest first (the last ones, around the failure, stay
    longest), then snapshots
    (the real inputs) largest first, then the extra files of the first module, then whole
    modules other than the first. The first module's before/after text and buffer
    assignment stay.
    """
    if not planned:
        return []
    first = planned[0].module
    extra = [p for p in planned if p.role in _EXTRA_ROLES]
    order = [p for p in extra if p.module != first]
    passes = [p for p in planned if p.role is Role.PASS_DUMP]  # plan() lists them as dumped
    order += sorted(passes, key=lambda p: p.module == first)  # a stable sort: in order still
    order += sorted(
        (p for p in planned if p.role in (Role.SNAPSHOT, Role.SHARDS)),
        key=lambda p: -p.source.stat().st_size,
    )
    order += [p for p in extra if p.module == first]
    order += [p for p in planned if p.module != first and p not in order]
    return order


def cannot_fit(order: Sequence[Planned], budget: int, fmt: str) -> list[tuple[Planned, int]]:
    """The first files of ``order`` (``drop_order``) to leave out before compressing
    anything, each with its estimated compressed size: while even an optimistic estimate of
    the whole in a ``fmt`` archive (``archive.compressed_size``) is over ``budget``. What is
    left is compressed, and then dropped one by one as before if it is still over."""
    if sum(p.source.stat().st_size for p in order) <= budget:
        return []  # fits uncompressed: no estimate needed (they cost a compression each)
    estimates = {p.arcname: archive.compressed_size(p.source, fmt) for p in order}
    total = sum(estimates.values())
    left_out: list[tuple[Planned, int]] = []
    for p in order:
        if total <= budget:
            break
        left_out.append((p, estimates[p.arcname]))
        total -= estimates[p.arcname]
    return left_out


def stage(
    planned: Iterable[Planned], dest: Path, redactor: Redactor, unredacted: list[str]
) -> Counter[str]:
    """Copy planned files into ``dest``: text redacted; binary protos in their string fields.

    Returns the redaction counts (home paths, user names, ...) for the summary; what a binary
    file still holds, where it could not be rewritten, goes to ``unredacted`` as notes.
    """
    counts: Counter[str] = Counter()
    for p in planned:
        target = dest / p.arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.source.suffix in _TEXT_SUFFIXES or p.role in _TEXT_ROLES:
            text, found = redactor.text_with_report(p.source.read_text("utf-8", "replace"))
            target.write_text(text, "utf-8")
            counts.update(found)
        else:
            copied = redactor.copy_binary(p.source, target)
            counts.update(copied.counts)
            if copied.left:
                unredacted.append(redactor.text(left_note(p.arcname, copied.left)))
    return counts


def write_text(dest: Path, arcname: str, text: str) -> None:
    target = dest / arcname
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, "utf-8")
