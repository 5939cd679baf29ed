"""What every benchmark stage shares: the configuration, result rows, timing and children."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PROGRAM = BENCH / "many_functions.py"
# The flags the issue names, and what collect itself asks for.
DUMP_FLAGS = (
    "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots "
    "--xla_dump_large_constants"
)


def compile_bytecode() -> None:
    """Compile xla-bugkit's modules as ``pip install`` does, so that a measured command does
    not compile them from source on each start (an editable install under
    PYTHONDONTWRITEBYTECODE would: 40 ms before every collect's program starts)."""
    import compileall

    compileall.compile_dir(REPO / "xla_bugkit", quiet=2)


@dataclass(frozen=True)
class Config:
    work: Path
    out: Path
    smoke: bool
    count: int  # functions in the generated program
    large_bytes: int  # the multiplied tree is at least this big
    reps: int  # repetitions of the fast measurements (medians are reported)
    python: str = sys.executable
    only: frozenset[str] = frozenset()  # the parts to run (empty: all)

    def wants(self, *parts: str) -> bool:
        return not self.only or any(p in self.only for p in parts)


@dataclass(frozen=True)
class Row:
    """One figure of the results table: ours against a baseline, and the target."""

    figure: str
    ours: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None  # None: no target, or not measured
    note: str = ""
    bound: str = ""  # what limits the figure, reported when the target is not met


@dataclass(frozen=True)
class Tools:
    rg: str | None
    sevenzip: str | None  # 7z, 7zz or 7za: Debian's 7zip package installs 7zz

    @classmethod
    def find(cls) -> Tools:
        seven = next((p for n in ("7z", "7zz", "7za") if (p := shutil.which(n))), None)
        return cls(shutil.which("rg"), seven)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def cpu_self() -> float:
    """User + system CPU seconds of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    """User + system CPU seconds of this process's children that have been waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def median_time(fn: Callable[[], T], reps: int) -> tuple[T, float]:
    """The last result and the median wall time of ``reps`` calls."""
    times: list[float] = []
    result: T
    for _ in range(max(reps, 1)):
        result, took = timed(fn)
        times.append(took)
    return result, statistics.median(times)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for children: xla_bugkit importable from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    env.update(extra or {})
    return env


def dump_env(dump_dir: Path) -> dict[str, str]:
    return child_env({"XLA_FLAGS": f"--xla_dump_to={dump_dir} {DUMP_FLAGS}"})


def run_child(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``cmd`` with its output captured; return it and its wall time."""
    return timed(
        lambda: subprocess.run(
            list(cmd),
            env=env or child_env(),
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
    )


def checked(done: subprocess.CompletedProcess[str], ok: Sequence[int] = (0,)) -> None:
    if done.returncode not in ok:
        tail = (done.stdout + done.stderr)[-2000:]
        raise RuntimeError(f"{' '.join(map(str, done.args))} exited {done.returncode}:\n{tail}")


def program_cmd(cfg: Config, *extra: str) -> list[str]:
    return [cfg.python, str(PROGRAM), "--count", str(cfg.count), *extra]


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def secs(s: float) -> str:
    return f"{s:.3f} s" if s < 10 else f"{s:.1f} s"


def size(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"
