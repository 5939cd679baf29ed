"""The platforms a module is compiled for (the CPU, a GPU, a TPU): one row each, with every
decision that differs between them, and the one lookup by name or alias.

A replay asks its row for the child's ``JAX_PLATFORMS``, the compiler's own flags variable,
the custom calls that compiler lowers, whether the child runs under a memory cap; ``verify``
on a machine without the platform asks for the plugins that would give it and the pip extra
that installs them; the bundle asks for the name the trackers' forms give its backend, the
tool that lists its devices and what ``repro.py`` sets; ``bisect`` searches the releases of a
platform's compiler where it ships apart from jaxlib (libtpu), on the device alone. Adding a
platform is a row here (``tests/platforms_test.py`` checks that every row is complete).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xla_bugkit.hlo import flags


@dataclass(frozen=True)
class Platform:
    """One platform, as every stage asks about it."""

    name: str  # as XLA's dumps, a manifest and ``replay --platform`` name it
    aliases: tuple[str, ...]  # other names for it (jax's own: "cuda")
    label: str  # the backend, as the trackers' forms name it: "CPU", "CUDA", "TPU"
    device: str  # its device, as a sentence names it: "the TPU's alone"
    needs: str  # what a module of it needs, as a person says it: "a TPU", "CUDA"
    # The replay child's JAX_PLATFORMS (the TPU's also starts the CPU, which runs its
    # op-by-op reference).
    jax_platforms: str
    plugins: tuple[str, ...]  # the distributions that give jax this platform (one is enough)
    # jax's pip extra for each plugin a bundle may record, oldest first: the newest it
    # recorded, or the first when it recorded none.
    extras: tuple[tuple[str, str], ...]
    device_tool: str | None  # the command that lists its devices for the environment report
    compiler_dist: str | None  # where its compiler ships when not in jaxlib ("libtpu")
    compiler_env: str | None  # the variable its compiler reads its own flags from at start-up
    # The variable jax reads the compiler's library from (jax's ``cloud_tpu_init``), which
    # a replay child is given to load another release of it (``bisect``).
    compiler_library_env: str | None
    # The PCI "vendor:device" ids its chips show as (jax's ``hardware_utils`` counts TPUs
    # so): a machine with none of them has none of its devices. Empty: not told this way.
    pci_ids: frozenset[str]
    compiler_targets: frozenset[str]  # custom calls its compiler lowers, never registered
    # Its op-by-op reference runs on the CPU (``replay.child.tpu_reference``), with the
    # module at HIGHEST precision where its float dots run at the default.
    cpu_reference: bool
    memory_capped: bool  # a replay child runs under the address-space cap (``replay.limits``)
    # Opening it takes seconds (a TPU chip, which one process at a time may hold; a GPU's
    # context): a replay child is kept for the next module (``replay.children.keeps``).
    costly_start: bool
    host_devices: bool  # its client makes as many devices as a module wants
    autotune: bool  # a replay loads the run's autotune results
    run_hlo_module: bool  # a public build of XLA's run_hlo_module runs its modules
    pjrt_device: str  # torch_xla's PJRT_DEVICE for it


CPU = Platform(
    name="cpu",
    aliases=(),
    label="CPU",
    device="CPU",
    needs="the CPU",
    jax_platforms="cpu",
    plugins=(),
    extras=(),
    device_tool=None,
    compiler_dist=None,
    compiler_env=None,
    compiler_library_env=None,
    pci_ids=frozenset(),
    compiler_targets=frozenset(),
    cpu_reference=False,
    memory_capped=True,
    costly_start=False,  # a fresh process per module isolates each, for little
    host_devices=True,  # --xla_force_host_platform_device_count
    autotune=False,
    run_hlo_module=True,
    pjrt_device="CPU",
)

GPU = Platform(
    name="gpu",
    aliases=("cuda",),
    label="CUDA",
    device="GPU",
    needs="CUDA",
    jax_platforms="gpu",
    plugins=("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-rocm7-plugin"),
    extras=(("jax-cuda12-plugin", "cuda12"), ("jax-cuda13-plugin", "cuda13")),
    device_tool="nvidia-smi",
    compiler_dist=None,
    compiler_env=None,
    compiler_library_env=None,
    pci_ids=frozenset(),
    compiler_targets=frozenset(),
    cpu_reference=False,
    # GPU clients map far more address space than they use.
    memory_capped=False,
    costly_start=True,
    host_devices=False,
    autotune=True,
    run_hlo_module=True,
    pjrt_device="CUDA",
)

TPU = Platform(
    name="tpu",
    aliases=(),
    label="TPU",
    device="TPU",
    needs="a TPU",
    jax_platforms="tpu,cpu",
    plugins=("libtpu",),
    extras=(("libtpu", "tpu"),),
    device_tool=None,
    compiler_dist="libtpu",
    compiler_env=flags.TPU_ENV,
    compiler_library_env="TPU_LIBRARY_PATH",
    # v3, v4, v5p, v5e, v6e, TPU7x and one unnamed, as jax 0.10.2 lists them.
    pci_ids=frozenset(
        f"0x1ae0:{device}"
        for device in ("0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076")
    ),
    # A Pallas kernel (Mosaic) is compiled by the TPU compiler from the call's backend
    # config, which carries it (``choose.mosaic.KERNEL_TARGET``).
    compiler_targets=frozenset({"tpu_custom_call"}),
    cpu_reference=True,
    memory_capped=False,
    costly_start=True,  # 8-12 s to open a v5e chip (benchmarks/TPU.md)
    host_devices=False,
    autotune=False,
    run_hlo_module=False,
    pjrt_device="TPU",
)

PLATFORMS: tuple[Platform, ...] = (CPU, GPU, TPU)

# ``replay --platform``'s choices.
NAMES: tuple[str, ...] = tuple(p.name for p in PLATFORMS)

_BY_NAME = {n: p for p in PLATFORMS for n in (p.name, *p.aliases)}


def find(name: str) -> Platform | None:
    """The platform ``name`` names (its name or an alias); None for one xla-bugkit has no
    row for."""
    return _BY_NAME.get(name)


def extra(platform: Platform, recorded: frozenset[str]) -> str:
    """jax's pip extra that installs ``platform`` as a bundle recorded it (``recorded``: the
    distributions in its versions); "" for one jaxlib gives alone."""
    chosen = [e for dist, e in platform.extras if dist in recorded]
    if chosen:
        return chosen[-1]
    return platform.extras[0][1] if platform.extras else ""


PCI_DEVICES = Path("/sys/bus/pci/devices")


def devices_here(platform: Platform, pci: Path = PCI_DEVICES) -> bool | None:
    """Whether this machine has one of ``platform``'s chips on its PCI bus (read from
    ``pci``, sysfs); None where the row cannot tell (no ``pci_ids``)."""
    if not platform.pci_ids:
        return None
    for vendor in sorted(pci.glob("*/vendor")):
        try:
            found = f"{vendor.read_text().strip()}:{(vendor.parent / 'device').read_text().strip()}"
        except OSError:
            continue
        if found in platform.pci_ids:
            return True
    return False
