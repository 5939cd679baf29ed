"""The environment report: what ``jax.print_environment_info()`` shows, redacted.

Collecting it never initialises a jax backend in this process: a backend reads XLA_FLAGS
once and may grab a GPU, so devices are probed in a child process, and only on request.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import platform
import shutil
import sys
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from xla_bugkit import __version__, proc
from xla_bugkit.errors import ProcessError
from xla_bugkit.redact import HOST, Redactor

PROBE_TIMEOUT_S = 60.0
NVIDIA_SMI_TIMEOUT_S = 10.0

# Shown in this order; jax plugins only when installed, since most users have none.
_CORE_DISTS = ("jax", "jaxlib", "numpy", "ml_dtypes", "protobuf", "py7zr")
_PLUGIN_DISTS = (
    "jax-cuda12-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "jax-rocm7-plugin",
    "jax-rocm7-pjrt",
    "libtpu",
)
# Backends a probe could hold while the program runs (a TPU opens in one process only; a
# GPU probe takes device memory): with any of them installed, the probe waits for the run.
_ACCELERATOR_DISTS = (*_PLUGIN_DISTS, "jax-metal", "jax-tpu", "tensorflow", "torch-xla")
# The other frameworks, by the name the start-up hook records each under: listed as the
# program imported them (only those it did), or, without its record, as installed here.
_FRAMEWORK_DISTS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"),
    "torch": ("torch",),
    "torch_xla": ("torch-xla", "torch_xla"),
}
NOT_INSTALLED = "not installed"
# Said after a version read where xla-bugkit runs, when the program's interpreter is another
# one or unknown: the program may have run other releases.
HERE_NOTE = "(xla-bugkit's environment)"
# Said after the interpreter when the program's was not recorded (it never imported jax,
# TensorFlow or torch_xla under collect's hook): the one shown is xla-bugkit's.
PYTHON_NOTE = "(xla-bugkit's; the program's was not recorded)"

# Runs in the child; prints one JSON line so that jax's own log lines cannot confuse us.
_PROBE = """\
import json, jax
devs = jax.devices()
print("XLA_BUGKIT_PROBE " + json.dumps({
    "backend": jax.default_backend(),
    "device_kind": devs[0].device_kind,
    "device_count": jax.device_count(),
    "process_count": jax.process_count(),
    "local_device_count": jax.local_device_count(),
    "devices": [f"{d!r} {d} kind={d.device_kind!r}" for d in devs],
}))
"""


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
        devices, summary = _probe_devices(env, redactor)
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
        nvidia_smi=_nvidia_smi(redactor),
        ptxas=_ptxas(redactor),
        here=_read_here(versions, program),
        python_here="python_executable" not in program,
    )


def _versions(program: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """xla-bugkit's version, then the program's (as its interpreter imported them, where the
    hook recorded them; xla-bugkit may run from a venv of its own), then this one's."""
    pairs = [("xla-bugkit", __version__)]
    pairs += [(d, program.get(_key(d)) or _dist_version(d)) for d in _CORE_DISTS]
    pairs += _framework_versions(program)
    pairs += [(d, v) for d in _PLUGIN_DISTS if (v := _dist_version(d)) != NOT_INSTALLED]
    return tuple(pairs + nvidia_dists())


def _framework_versions(program: Mapping[str, str]) -> list[tuple[str, str]]:
    """TensorFlow, torch and torch_xla: those the program imported, as it recorded them; with
    no record of the program's, those installed here."""
    if program:
        return [(name, program[name]) for name in _FRAMEWORK_DISTS if program.get(name)]
    found = []
    for name, dists in _FRAMEWORK_DISTS.items():
        version = next((v for d in dists if (v := _dist_version(d)) != NOT_INSTALLED), None)
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


def nvidia_dists() -> list[tuple[str, str]]:
    """The NVIDIA libraries installed as wheels (cuBLAS, cuDNN, NCCL, ptxas' nvcc, ...), by
    name: some "XLA bugs" are a library release's bug."""
    found: dict[str, str] = {}
    # By the names of their dist-info folders: reading every distribution's METADATA to
    # learn its name took 30 ms of collect's time after the program.
    for folder in sys.path:
        for info in glob.glob(os.path.join(glob.escape(folder or "."), "nvidia[-_]*.dist-info")):
            name, _, version = os.path.basename(info).removesuffix(".dist-info").partition("-")
            found.setdefault(name.lower().replace("_", "-"), version)
    return sorted(found.items())


# The Project-URL labels that name a repository pip can install from (not a homepage).
_SOURCE_LABELS = ("source", "repository", "source code", "code")


def install_command() -> str:
    """How a maintainer installs the xla-bugkit that made a bundle: from the source its
    metadata names (``[project.urls]``), or from the repository it was installed from, with
    pipx; by name and version otherwise."""
    try:
        dist = metadata.distribution("xla-bugkit")
    except metadata.PackageNotFoundError:
        return "pip install xla-bugkit"
    for entry in dist.metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() in _SOURCE_LABELS and url.strip().startswith("https://"):
            return f"pipx install git+{url.strip()}"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url, vcs = str(direct.get("url", "")), direct.get("vcs_info")
    if url.startswith("https://") and isinstance(vcs, dict) and vcs.get("vcs") == "git":
        commit = str(vcs.get("commit_id", ""))
        return f"pipx install git+{url}" + (f"@{commit}" if commit else "")
    return f"pip install xla-bugkit=={dist.version}"


def _dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


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


class _EarlyProbe(threading.Thread):
    """The device probe, run in the background while the user's program runs."""

    def __init__(self, env: dict[str, str]) -> None:
        # A daemon: an interrupted collect must not wait for it (proc stops its child).
        super().__init__(name="xla-bugkit device probe", daemon=True)
        self.env = env
        self.result: tuple[int | None, str] = (None, "device probe did not finish")

    def run(self) -> None:
        try:
            self.result = _capture([sys.executable, "-c", _PROBE], self.env, PROBE_TIMEOUT_S)
        except KeyboardInterrupt:
            self.result = (None, "device probe interrupted")


_early: list[_EarlyProbe] = []


def start_device_probe(environ: dict[str, str] | None = None) -> bool:
    """Start the device probe now, in the background, where it cannot contend with a
    program for its devices: only the CPU backend is installed, or ``JAX_PLATFORMS=cpu``.

    The probe imports jax in a child (seconds); started before the program runs, it is done
    by the time the bundle is written, and ``collect_env(probe_devices=True)`` with the same
    environment takes its result. Returns whether it started.
    """
    env = dict(os.environ if environ is None else environ)
    if not cpu_only(env):
        return False
    probe = _EarlyProbe(env)
    probe.start()
    _early.append(probe)
    return True


def cpu_only(env: dict[str, str]) -> bool:
    """True when jax can use nothing but the CPU here: no accelerator plugin or framework
    is installed (or a CUDA/ROCm jaxlib), or ``JAX_PLATFORMS`` asks for the CPU alone."""
    if env.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return True
    if any(_dist_version(d) != NOT_INSTALLED for d in _ACCELERATOR_DISTS):
        return False
    jaxlib = _dist_version("jaxlib")
    if "cuda" in jaxlib or "rocm" in jaxlib:
        return False
    return importlib.util.find_spec("jax_plugins") is None


def _run_probe(env: dict[str, str]) -> tuple[int | None, str]:
    for probe in _early:
        if probe.env == env:
            _early.remove(probe)
            probe.join()
            return probe.result
    return _capture([sys.executable, "-c", _PROBE], env, PROBE_TIMEOUT_S)


def _probe_devices(env: dict[str, str], redactor: Redactor) -> tuple[tuple[str, ...], str]:
    code, out = _run_probe(env)
    for line in out.splitlines():
        if line.startswith("XLA_BUGKIT_PROBE "):
            info = json.loads(line.split(" ", 1)[1])
            devices = tuple(redactor.text(d) for d in info["devices"])
            # jax's own layout: "<device_kind>-<device_count>, <n> local devices".
            summary = (
                f"{info['device_kind']}-{info['device_count']}, "
                f"{info['local_device_count']} local devices, "
                f"backend {info['backend']}, process_count {info['process_count']}"
            )
            return devices, summary
    last = out.strip().splitlines()[-1:] or ["no output"]
    why = "timed out" if code is None else f"exited with status {code}"
    return (), redactor.text(f"device probe failed ({why}): {last[0]}")


def _nvidia_smi(redactor: Redactor) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    code, out = _capture([exe], None, NVIDIA_SMI_TIMEOUT_S)
    if code != 0:
        why = "timed out" if code is None else f"exited with status {code}"
        return redactor.text(f"(nvidia-smi {why})\n{out}")
    return redactor.text(out)


def _ptxas(redactor: Redactor) -> str | None:
    """``ptxas --version`` of the one XLA would use (on PATH, or the NVIDIA nvcc wheel's),
    where jax can compile for CUDA here: none otherwise, since no CPU module meets it."""
    cuda = ("jax-cuda12-plugin", "jax-cuda13-plugin")
    if all(_dist_version(d) == NOT_INSTALLED for d in cuda):
        return None
    exe = shutil.which("ptxas")
    if exe is None:
        spec = importlib.util.find_spec("nvidia")
        roots = (spec.submodule_search_locations or []) if spec is not None else []
        for root in roots:
            candidate = Path(root) / "cuda_nvcc" / "bin" / "ptxas"
            if candidate.is_file():
                exe = str(candidate)
                break
    if exe is None:
        return None
    code, out = _capture([exe, "--version"], None, NVIDIA_SMI_TIMEOUT_S)
    return redactor.text(out if code == 0 else f"(ptxas exited with status {code})\n{out}")


def _capture(cmd: list[str], env: dict[str, str] | None, timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` through proc; (status, or None on timeout, and the combined output)."""
    try:
        done = proc.run_captured(cmd, env=env, timeout=timeout)
    except ProcessError as e:
        return 127, str(e)
    return (None if done.timed_out else done.returncode), done.output


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux
    if sys.platform == "darwin":
        _, out = _capture(["sysctl", "-n", "machdep.cpu.brand_string"], None, 5)
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
