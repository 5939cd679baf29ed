"""The machine's devices, asked in child processes so that no backend starts in this one:
jax's device list (started early, while the program runs, where it cannot contend with it),
nvidia-smi, and the ptxas XLA would use."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import threading
from pathlib import Path

from xla_bugkit import platforms, proc
from xla_bugkit.bundle import installed
from xla_bugkit.bundle.installed import NOT_INSTALLED
from xla_bugkit.errors import ProcessError
from xla_bugkit.redact import Redactor

PROBE_TIMEOUT_S = 60.0
NVIDIA_SMI_TIMEOUT_S = 10.0

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


class _EarlyProbe(threading.Thread):
    """The device probe, run in the background while the user's program runs."""

    def __init__(self, env: dict[str, str]) -> None:
        # A daemon: an interrupted collect must not wait for it (proc stops its child).
        super().__init__(name="xla-bugkit device probe", daemon=True)
        self.env = env
        self.result: tuple[int | None, str] = (None, "device probe did not finish")

    def run(self) -> None:
        try:
            self.result = capture([sys.executable, "-c", _PROBE], self.env, PROBE_TIMEOUT_S)
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
    if any(installed.dist_version(d) != NOT_INSTALLED for d in installed.ACCELERATOR_DISTS):
        return False
    jaxlib = installed.dist_version("jaxlib")
    if "cuda" in jaxlib or "rocm" in jaxlib:
        return False
    return importlib.util.find_spec("jax_plugins") is None


def _run_probe(env: dict[str, str]) -> tuple[int | None, str]:
    for probe in _early:
        if probe.env == env:
            _early.remove(probe)
            probe.join()
            return probe.result
    return capture([sys.executable, "-c", _PROBE], env, PROBE_TIMEOUT_S)


def jax_devices(env: dict[str, str], redactor: Redactor) -> tuple[tuple[str, ...], str]:
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


def nvidia_smi(redactor: Redactor) -> str | None:
    """What the GPU's device tool (``platforms.GPU.device_tool``) says; None without it."""
    tool = platforms.GPU.device_tool
    exe = shutil.which(tool) if tool is not None else None
    if exe is None:
        return None
    code, out = capture([exe], None, NVIDIA_SMI_TIMEOUT_S)
    if code != 0:
        why = "timed out" if code is None else f"exited with status {code}"
        return redactor.text(f"({tool} {why})\n{out}")
    return redactor.text(out)


def ptxas(redactor: Redactor) -> str | None:
    """``ptxas --version`` of the one XLA would use (on PATH, or the NVIDIA nvcc wheel's),
    where jax can compile for CUDA here: none otherwise, since no CPU module meets it."""
    cuda = ("jax-cuda12-plugin", "jax-cuda13-plugin")
    if all(installed.dist_version(d) == NOT_INSTALLED for d in cuda):
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
    code, out = capture([exe, "--version"], None, NVIDIA_SMI_TIMEOUT_S)
    return redactor.text(out if code == 0 else f"(ptxas exited with status {code})\n{out}")


def capture(cmd: list[str], env: dict[str, str] | None, timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` through proc; (status, or None on timeout, and the combined output)."""
    try:
        done = proc.run_captured(cmd, env=env, timeout=timeout)
    except ProcessError as e:
        return 127, str(e)
    return (None if done.timed_out else done.returncode), done.output
