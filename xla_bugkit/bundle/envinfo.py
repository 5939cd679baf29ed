"""The environment report: what ``jax.print_environment_info()`` shows, redacted.

Collecting it never initialises a jax backend in this process: a backend reads XLA_FLAGS
once and may grab a GPU, so devices are probed in a child process, and only on request
(``devices``); the versions are read from what is installed (``installed``).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from xla_bugkit._version import __version__
from xla_bugkit.bundle import installed
from xla_bugkit.bundle.devices import capture, jax_devices, nvidia_smi, ptxas
from xla_bugkit.bundle.installed import NOT_INSTALLED, dist_version
from xla_bugkit.redact import HOST, Redactor

# Said after a version read where xla-bugkit runs, when the program's interpreter is another
# one or unknown: the program may have run other releases.
HERE_NOTE = "(xla-bugkit's environment)"
# Said after the interpreter when the program's was not recorded (it never imported jax,
# TensorFlow or torch_xla under collect's hook): the one shown is xla-bugkit's.
PYTHON_NOTE = "(xla-bugkit's; the program's was not recorded)"


@dataclass(frozen=True)
class EnvReport:
    """Versions, platform, devices and environment of this machine, already redacted."""

    versions: tuple[tuple[str, str], ...]  # (distribution, version or NOT_INSTALLED)
    python: str
    python_executable: str
    uname: tuple[tuple[str, str], ...]  # platform.uname() fields, node replaced by <HOST>
    cpu_model: str
    cpu_count: int | None
    memory_total_bytes: int | None
    devices: tuple[str, ...]  # empty when not probed or the probe failed
    device_summary: str  # "cpu-1, 1 local devices" or why there is no device list
    environment: tuple[tuple[str, str], ...]  # allowlisted, redacted variables
    nvidia_smi: str | None
    ptxas: str | None = None  # ``ptxas --version``: old ones miscompile
    # The names in ``versions`` read where xla-bugkit runs, when the program ran under
    # another interpreter or an unknown one (``HERE_NOTE``), and whether ``python`` and
    # ``python_executable`` are xla-bugkit's own, the program's being unknown (``PYTHON_NOTE``).
    here: tuple[str, ...] = ()
    python_here: bool = False

    def version(self, dist: str) -> str:
        """The installed version of ``dist`` (e.g. ``"jaxlib"``), or ``NOT_INSTALLED``."""
        return dict(self.versions).get(dist, NOT_INSTALLED)

    def to_text(self) -> str:
        """The report in the layout of ``jax.print_environment_info()``, plus extras."""
        width = max(len(name) for name, _ in self.versions) + 1
        lines = [
            f"{name + ':':<{width}} {ver}" + (f" {HERE_NOTE}" if name in self.here else "")
            for name, ver in self.versions
        ]
        ours = f" {PYTHON_NOTE}" if self.python_here else ""
        lines += [
            f"python: {self.python}{ours}",
            f"python executable: {self.python_executable}{ours}",
            f"device info: {self.device_summary}",
            *(f"  {d}" for d in self.devices),
            "platform: uname_result(" + ", ".join(f"{k}={v!r}" for k, v in self.uname) + ")",
            f"cpu: {self.cpu_model} ({self.cpu_count} logical cpus)",
            f"memory: {_gib(self.memory_total_bytes)}",
            *(f"{name}={value}" for name, value in self.environment),
        ]
        if self.nvidia_smi:
            lines += ["", "$ nvidia-smi", self.nvidia_smi.rstrip("\n")]
        if self.ptxas:
            lines += ["", "$ ptxas --version", self.ptxas.rstrip("\n")]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; pairs become objects."""
        d = asdict(self)
        for key in ("versions", "uname", "environment"):
            d[key] = dict(d[key])
        d["devices"] = list(self.devices)
        return d

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class SeenDevices:
    """The devices a process of the run saw when its backend started (the capture hook's
    record): the program's own view, flags it set itself included, and no probe to run."""

    platform: str
    kind: str
    count: int
    local: int
    processes: int
    listed: tuple[str, ...]
    runtime: str = ""  # the backend's platform_version: libtpu's build on a TPU

    def summary(self) -> str:
        built = f"; runtime: {self.runtime}" if self.runtime and self.platform != "cpu" else ""
        return (
            f"{self.kind}-{self.count}, {self.local} local devices, backend {self.platform}, "
            f"process_count {self.processes} (as the program saw them){built}"
        )


def collect_env(
    redactor: Redactor,
    *,
    probe_devices: bool = False,
    environ: dict[str, str] | None = None,
    seen: SeenDevices | None = None,
    program: Mapping[str, str] | None = None,
) -> EnvReport:
    """Collect the report; the devices are ``seen``'s, else with ``probe_devices`` a child
    ``python -c`` lists jax's devices.

    ``environ`` (default ``os.environ``) is both what the report shows and what the probe
    runs with, so JAX_PLATFORMS and friends apply to the probe as they would to the program.
    """
    env = dict(os.environ if environ is None else environ)
    if seen is not None:
        devices, summary = tuple(redactor.text(d) for d in seen.listed), seen.summary()
    elif probe_devices:
        devices, summary = jax_devices(env, redactor)
    else:
        devices, summary = (), "not probed"
    program = program or {}
    versions = _versions(program)
    return EnvReport(
        versions=versions,
        python=program.get("python") or sys.version.replace("\n", " "),
        python_executable=redactor.text(program.get("python_executable") or sys.executable),
        uname=_uname(redactor),
        cpu_model=redactor.text(_cpu_model()),
        cpu_count=os.cpu_count(),
        memory_total_bytes=_memory_total(),
        devices=devices,
        device_summary=summary,
        environment=tuple(redactor.env(env).items()),
        nvidia_smi=nvidia_smi(redactor),
        ptxas=ptxas(redactor),
        here=_read_here(versions, program),
        python_here="python_executable" not in program,
    )


def _versions(program: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """xla-bugkit's version, then the program's (as its interpreter imported them, where the
    hook recorded them; xla-bugkit may run from a venv of its own), then this one's."""
    pairs = [("xla-bugkit", __version__)]
    pairs += [(d, program.get(_key(d)) or dist_version(d)) for d in installed.CORE_DISTS]
    pairs += _framework_versions(program)
    pairs += [(d, v) for d in installed.PLUGIN_DISTS if (v := dist_version(d)) != NOT_INSTALLED]
    return tuple(pairs + installed.nvidia_dists())


def _framework_versions(program: Mapping[str, str]) -> list[tuple[str, str]]:
    """TensorFlow, torch and torch_xla: those the program imported, as it recorded them; with
    no record of the program's, those installed here."""
    if program:
        return [(name, program[name]) for name in installed.FRAMEWORK_DISTS if program.get(name)]
    found = []
    for name, dists in installed.FRAMEWORK_DISTS.items():
        version = next((v for d in dists if (v := dist_version(d)) != NOT_INSTALLED), None)
        if version is not None:
            found.append((name, version))
    return found


def _read_here(
    versions: tuple[tuple[str, str], ...], program: Mapping[str, str]
) -> tuple[str, ...]:
    """The names of ``versions`` whose version is this environment's where it may not be the
    program's: it ran under another interpreter, or under one nobody recorded."""
    if _same_environment(program.get("python_executable"), sys.executable):
        return ()  # the same packages
    return tuple(
        name
        for name, version in versions
        if name != "xla-bugkit" and version != NOT_INSTALLED and program.get(_key(name)) != version
    )


def _same_environment(theirs: str | None, ours: str) -> bool:
    """Whether the interpreter ``theirs`` runs in this one's environment: the same folder
    (``python`` and ``python3`` of one venv). Links are not resolved: every venv's python
    leads to the same base interpreter, and a venv is told by the folder it is run from."""
    if not theirs:
        return False
    return os.path.dirname(os.path.abspath(theirs)) == os.path.dirname(os.path.abspath(ours))


def _key(dist: str) -> str:
    """The name the start-up hook records ``dist``'s version under."""
    return dist.replace("-", "_")


def _uname(redactor: Redactor) -> tuple[tuple[str, str], ...]:
    u = platform.uname()
    # The node is the host name whatever the redactor knows; other fields may embed it too.
    return (
        ("system", u.system),
        ("node", HOST),
        ("release", redactor.text(u.release)),
        ("version", redactor.text(u.version)),
        ("machine", u.machine),
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux
    if sys.platform == "darwin":
        _, out = capture(["sysctl", "-n", "machdep.cpu.brand_string"], None, 5)
        if out.strip():
            return out.strip()
    return platform.processor() or "unknown"


def _memory_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass  # not Linux, or an unexpected format
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.1f} GiB"
