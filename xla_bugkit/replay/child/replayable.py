"""Whether a dumped module can replay here, checked in the replay child before compiling:
host callbacks, Shardy markers without their PJRT folder, custom calls no library registered,
constants the text dump left out; and the module's replicas and partitions.

Runs in the child (``worker``), with jaxlib loaded through ``jaxlib_adapter``.
"""

from __future__ import annotations

import re
from pathlib import Path

from xla_bugkit import jaxlib_adapter, platforms
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo.parser import custom_call_targets

# Host callbacks run Python code of the original process; they cannot be replayed.
CALLBACK_TARGETS = re.compile(r"python.*callback|callback.*python|^xla_.*_callback$")

# Targets that XLA's own passes consume; they are never registered as handlers.
INTERNAL_TARGETS = frozenset(
    {
        "Sharding",
        "SPMDFullToShardShape",
        "SPMDShardToFullShape",
        "LayoutConstraint",
        "MoveToHost",
        "MoveToDevice",
        "PadToStatic",
        "SliceToDynamic",
        "annotate_device_placement",
        "AllocateBuffer",
        "X64Combine",
        "X64SplitLow",
        "X64SplitHigh",
        "ShardBarrierFrom",
        "ShardBarrierTo",
        "local_sharding",
        "xla.sdy.FuncResultSharding",
    }
)


# jaxlib's CPU LAPACK kernels (jnp.linalg, jax.scipy.linalg), which need setting up first.
LAPACK_PREFIX = "lapack_"

# How HLO text prints a constant it leaves out (no --xla_dump_large_constants).
_ELIDED = re.compile(r"constant\(\{\.\.\.\}\)")

_REPLICAS = re.compile(r"\breplica_count=(\d+)")

_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")


# A host callback with no result (jax.debug.print, jax.debug.callback): a custom call of an
# empty tuple, run only for what it prints or logs.
_RESULTLESS_CALLBACK = re.compile(
    r'^\s*%?(?P<name>[\w.\-]+) = \(\) custom-call\(.*custom_call_target="(?P<target>[^"]+)"'
)


def without_print_callbacks(text: str) -> tuple[str, int]:
    """``text`` (a module's HLO) without its host callbacks that return nothing and whose
    result no instruction reads (``jax.debug.print``, ``jax.debug.callback``): what they
    print is the original process's, and the computation does not depend on them. Returns
    the text and how many were left out; callbacks whose results the module uses stay (and
    keep the module from replaying)."""
    lines = text.splitlines(keepends=True)
    dropped = set()
    for i, line in enumerate(lines):
        m = _RESULTLESS_CALLBACK.match(line)
        if m is None or not CALLBACK_TARGETS.search(m.group("target")):
            continue
        used = re.compile(rf"(?<![\w.\-%])%?{re.escape(m.group('name'))}(?![\w.\-])")
        if not any(used.search(other) for j, other in enumerate(lines) if j != i):
            dropped.add(i)
    if not dropped:
        return text, 0
    return "".join(x for i, x in enumerate(lines) if i not in dropped), len(dropped)


class NotReplayable(BugkitError):
    """The module cannot be replayed here; the message says why."""


def check_module(text: str, platform: str, *, pjrt: bool = False) -> tuple[int, int]:
    """Refuse what cannot run here; return the module's (replicas, partitions).

    ``pjrt``: the PJRT folder's module.mlir and compile_options.pb are there to compile from.
    """
    targets = sorted(set(custom_call_targets(text)))
    for target in targets:
        if CALLBACK_TARGETS.search(target):
            raise NotReplayable(
                f"the module calls back into Python (custom-call {target}); "
                "host callbacks cannot run outside the original process"
            )
        if target.startswith("xla.sdy.") and target not in INTERNAL_TARGETS and not pjrt:
            # Shardy's markers only compile inside its partitioner, which runs on the PJRT
            # folder's module.mlir; the HLO -> StableHLO round trip loses what it needs.
            raise NotReplayable(
                f"the module is partitioned with Shardy (custom-call {target}), and only its "
                "PJRT folder (module.mlir, compile_options.pb) replays that; it is missing"
            )
    registered = jaxlib_adapter.custom_call_targets(platform) | lowered(platform)
    missing = [
        t
        for t in targets
        if t not in registered and t not in INTERNAL_TARGETS and not t.startswith("xla.sdy.")
    ]
    if missing:
        raise NotReplayable(
            f"custom-call target {missing[0]!r} is not registered for {platform} here "
            "(its library must be loaded)"
        )
    header = text.split("\n", 1)[0]
    replicas = _REPLICAS.search(header)
    partitions = _PARTITIONS.search(header)
    return (
        int(replicas.group(1)) if replicas else 1,
        int(partitions.group(1)) if partitions else 1,
    )


def module_bytes(path: str) -> bytes:
    """The serialized HloModuleProto of a before-optimizations ``.hlo.pb``, or of its text."""
    from xla_bugkit.hlo import hlo_proto

    if not path.endswith(".txt"):
        return hlo_proto.module_bytes(hlo_proto.read_hlo_proto(path))
    text = Path(path).read_text("utf-8", "replace")
    if _ELIDED.search(text):
        raise NotReplayable(
            f"{Path(path).name} elides large constants ({{...}}): dump with "
            "--xla_dump_large_constants, or replay the .hlo.pb"
        )
    return jaxlib_adapter.hlo_text_to_module_bytes(text)


def lowered(platform: str) -> frozenset[str]:
    """The custom calls ``platform``'s own compiler lowers (never registered as handlers):
    its row's ``compiler_targets``; none for a platform without a row."""
    found = platforms.find(platform)
    return found.compiler_targets if found is not None else frozenset()


def manual_targets(text: str) -> list[str]:
    """The module's Shardy manual-computation markers (shard_map, pmap): it runs only
    partitioned, so op by op has no meaning for it."""
    manual = [t for t in custom_call_targets(text) if t.startswith("xla.sdy.")]
    return [t for t in manual if t not in INTERNAL_TARGETS]


def plain_references(platform: str, text: str) -> bool:
    """Whether both of the module's references run as for any module: it is not partitioned
    by hand, and holds no kernel only ``platform``'s compiler lowers (which no reference can
    run: a Pallas kernel on a TPU)."""
    return not manual_targets(text) and not lowered(platform) & set(custom_call_targets(text))
