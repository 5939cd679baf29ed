"""What a replay needs, found in a dump folder or an unpacked bundle: ``ReplayInput``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import platforms
from xla_bugkit.archive.naming import suffix_format
from xla_bugkit.choose import snapshot as snapshots
from xla_bugkit.choose.dumps import DumpModule, Role, index
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import flags
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance

# What a replay reads of a module, by role; a bundle keeps these (and more for people). The
# before-optimizations text is read only when there is no proto (the worker parses it).
REPLAY_ROLES = (
    Role.BEFORE_PROTO,
    Role.BEFORE_TEXT,
    Role.DEBUG_OPTIONS,
    Role.PJRT_MLIR,
    Role.COMPILE_OPTIONS,
    Role.AUTOTUNE,
)


@dataclass(frozen=True)
class Release:
    """A jaxlib release unpacked (its jaxlib and jax wheels) into ``path``, which goes first
    on a replay child's path: the child replays under that release, not the installed one."""

    version: str
    path: Path
    # The interpreter its child runs under (a release built only for another Python, with
    # that Python's numpy and ml_dtypes unpacked beside it); None: this one.
    python: str | None = None


@dataclass(frozen=True)
class CompilerRelease:
    """A release of a platform's compiler shipped apart from jaxlib (libtpu), unpacked: the
    replay child loads its ``library`` in place of the installed one, under this
    interpreter's jaxlib (the platform row's ``compiler_library_env`` names it)."""

    dist: str  # "libtpu"
    version: str
    library: Path  # libtpu.so


@dataclass(frozen=True)
class Interpreted:
    """The program run again with Pallas's TPU interpret mode forced on it (collect's run
    for a Pallas kernel's reference): what the module's first call gave under that mode.
    The mode simulates each kernel in the program's own Python, so no replay can compute it
    again: these outputs, recorded at collect, are the kernel's reference (the bundle's
    expected.npz, read back by verify)."""

    outputs: Path | None  # the call's outputs (``protocol.save_arrays``); None: none
    error: str = ""  # why the interpret mode could not run the kernel (its first line)
    # The program's own check under the interpret mode: True it passed (exit status 0),
    # False it failed, None not known (verify, from a bundle).
    passed: bool | None = None


@dataclass(frozen=True)
class ReplayInput:
    """One module to replay, as found in a dump or a bundle."""

    name: str  # module name, e.g. "jit_train_step"
    hlo: Path  # before-optimizations HloProto (.hlo.pb), or its text (.txt) when alone
    snapshot: Path | None = None  # HloSnapshot with the real arguments (+ recorded result)
    mlir: Path | None = None  # the PJRT folder's module.mlir
    compile_options: Path | None = None  # the PJRT folder's compile_options.pb
    xla_flags: tuple[str, ...] = ()  # recorded XLA flags, dump flags already removed
    # The TPU compiler's flags of the run (LIBTPU_INIT_ARGS), as recorded: a replay on a TPU
    # applies those ``flags.admit_tpu`` allows, and no other replay any. None: none recorded
    # (a dump replayed by hand, an older bundle): the environment's stand.
    tpu_args: tuple[str, ...] | None = None
    platform: str = "cpu"
    # xla_flags were given by hand: they replace every recorded flag, including the debug
    # options and overrides recorded in compile_options.pb.
    flags_given: bool = False
    # The interpreter to replay under (its jax and jaxlib): the program's own, when collect
    # runs from another one; None: xla-bugkit's. Never taken from a bundle.
    python: str | None = None
    # How far its outputs may be from a reference (the user's --rtol/--atol).
    tolerance: Tolerance = DEFAULT_TOLERANCE
    # The jaxlib release to replay under (bisect, verify --jaxlib); None: the interpreter's.
    release: Release | None = None
    # The compiler release to replay under (bisect of a TPU bundle); None: the installed one.
    compiler: CompilerRelease | None = None
    # The module as metadata-free text (``convert --to hlo-short``), for a release that
    # cannot read the proto: older ones (``convert.carrier``). Never taken from a bundle.
    hlo_text: Path | None = None
    # The kernels XLA's autotuner chose in the run (a GPU module's autotune_results.pbtxt):
    # replayed with them, the GPU compile picks what the run picked.
    autotune: Path | None = None
    # A Pallas kernel's outputs under the interpret mode, the reference its compiled replay
    # is judged by; None: no such run.
    interpreted: Interpreted | None = None


def replay_input(name: str, files: Mapping[str, Path], platform: str) -> ReplayInput | None:
    """What a replay of one module needs, from its files by role (a dump or an unpacked bundle).

    Without a before-optimizations proto its text is used (a dump made without
    ``--xla_dump_hlo_as_proto``); None when neither is there: nothing to compile.
    """
    hlo = files.get(Role.BEFORE_PROTO.value) or files.get(Role.BEFORE_TEXT.value)
    if hlo is None:
        return None
    options = files.get(Role.DEBUG_OPTIONS.value)
    xla_flags = flags.from_debug_options(options.read_text("utf-8", "replace")) if options else ()
    on = replay_platform(platform or _platform_of(files))
    return ReplayInput(
        name=name,
        hlo=hlo,
        snapshot=files.get(Role.SNAPSHOT.value),
        mlir=files.get(Role.PJRT_MLIR.value),
        compile_options=files.get(Role.COMPILE_OPTIONS.value),
        xla_flags=xla_flags,
        platform=on,
        autotune=files.get(Role.AUTOTUNE.value) if _autotunes(on) else None,
    )


def _autotunes(platform: str) -> bool:
    found = platforms.find(platform)
    return found is not None and found.autotune


# What a TPU's PJRT folder's topology.pb holds: its description's type name.
_TPU_TOPOLOGY = b"TpuPjRtTopologyDescriptionProto"


def _platform_of(files: Mapping[str, Path]) -> str:
    """The platform a module's own files name, where its record names none (a bundle
    written on a TPU before the manifest said so): "tpu", or "" (unknown)."""
    if Role.TPU_ENV.value in files:
        return "tpu"
    topology = files.get(Role.TOPOLOGY.value)
    if topology is None:
        return ""
    try:
        with topology.open("rb") as f:
            head = f.read(1 << 16)  # a topology is a few hundred bytes
    except OSError:
        return ""
    return "tpu" if _TPU_TOPOLOGY in head else ""


def replay_platform(recorded: str) -> str:
    """The platform a module recorded on ``recorded`` replays on ("" for an old bundle)."""
    return "gpu" if "gpu" in recorded else recorded or "cpu"


def module_files(root: Path, module: DumpModule) -> dict[str, Path]:
    """A dump module's files by role, as ``replay_input`` takes them (its newest snapshot, or
    the first whose result held a NaN the newest's also holds: ``snapshots.replay_snapshot``)."""
    files = {f.role.value: root / f.path for f in module.files if f.role in REPLAY_ROLES}
    snapshot = snapshots.replay_snapshot(root, module)
    if snapshot is not None:
        files[Role.SNAPSHOT.value] = root / snapshot.path
    return files


def dump_modules(target: Path, module_re: str | None) -> list[tuple[Path, DumpModule]]:
    """The dump modules ``target`` names: a dump dir (filtered by ``module_re``) or one file."""
    if not target.exists():
        raise BugkitError(f"{target} does not exist")
    if target.is_dir():
        found_index = index(target)
        pattern = re.compile(module_re) if module_re else None
        found = [m for m in found_index.modules if pattern is None or pattern.search(m.label)]
        if not found_index.modules:
            raise BugkitError(
                f"{target} holds no XLA dump (no files named module_NNNN.NAME.SUFFIX)"
            )
        if not found:
            raise BugkitError(f"no module in {target} matches {module_re!r}")
        return [(target, m) for m in found]
    if suffix_format(target) is not None:
        raise BugkitError(
            f"{target.name} is an archive, not a dump: a bundle is checked and replayed with "
            f"xla-bugkit verify {target} (replay takes the folder it is unpacked into)"
        )
    parent = index(target.parent)
    for m in parent.modules:
        if any(parent.root / f.path == target for f in m.files):
            return [(target.parent, m)]
    raise BugkitError(f"{target.name} is not a file of an XLA dump (module_NNNN.NAME.SUFFIX)")
