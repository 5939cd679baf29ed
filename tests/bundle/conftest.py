"""Real bundles, each made once per session by the installed ``xla-bugkit collect``.

Every program fails for real (tests/programs/); build_test reads what the bundles say and
repro_test runs their repro.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


@dataclass(frozen=True)
class Collected:
    """One collect: its exit status, its summary (stderr) and the bundle it wrote."""

    returncode: int
    stderr: str
    bundle: Path

    def manifest(self) -> dict:  # type: ignore[type-arg]
        with zipfile.ZipFile(self.bundle) as z:
            return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]

    def names(self) -> list[str]:
        with zipfile.ZipFile(self.bundle) as z:
            return z.namelist()

    def text(self, name: str) -> str:
        with zipfile.ZipFile(self.bundle) as z:
            return z.read(name).decode()

    def unpack(self, dest: Path) -> Path:
        with zipfile.ZipFile(self.bundle) as z:
            z.extractall(dest)
        return dest


def cpu_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", **extra}


def run_collect(
    out: Path, argv: list[str], *extra: str, cwd: Path | None = None, xla_flags: str = ""
) -> Collected:
    """``XLA_FLAGS=xla_flags xla-bugkit collect -o OUT EXTRA... -- ARGV``."""
    command = [XLA_BUGKIT, "collect", "-o", str(out), *extra, "--", *argv]
    env = cpu_env(XLA_FLAGS=xla_flags) if xla_flags else cpu_env()
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=900)  # fmt: skip
    return Collected(done.returncode, done.stderr, out)


@pytest.fixture(scope="session")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Collected]:
    """``bundles("compile_crash", "--no-replay")``: the bundle of a tests/programs program,
    collected once per session for each set of options (and the user's ``xla_flags``)."""
    root = tmp_path_factory.mktemp("bundles")
    made: dict[tuple[str, ...], Collected] = {}

    def get(program: str, *extra: str, xla_flags: str = "") -> Collected:
        key = (program, xla_flags, *extra)
        if key not in made:
            out = root / f"{program}-{len(made)}.zip"
            argv = [sys.executable, str(PROGRAMS / f"{program}.py")]
            made[key] = run_collect(out, argv, *extra, cwd=root, xla_flags=xla_flags)
        return made[key]

    return get
