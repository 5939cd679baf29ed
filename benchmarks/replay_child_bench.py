"""A replay child through jaxlib alone against the same child through jax.

    python benchmarks/replay_child_bench.py [--rounds 5] [--out benchmarks/REPLAY_CHILD.md]

A small program dumps three real modules: a small matmul, an MLP's training step, and a
linear solve (LAPACK custom calls, which need jax: that child imports it and shows what the
check before it costs). For each, interleaved round by round (AB, then BA), it times the
replay child (``python -m xla_bugkit.replay.child.worker SPEC``, references on, as verify and
collect start it) and the whole ``xla-bugkit replay -q`` command, with and without
``XLA_BUGKIT_REPLAY_THROUGH_JAX``. Medians; the ratio is alone / through jax.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))
THROUGH_JAX = "XLA_BUGKIT_REPLAY_THROUGH_JAX"

PROGRAM = """
import jax, jax.numpy as jnp

@jax.jit
def small(x, y):
    return jnp.sin(x) @ y

def loss(params, x, y):
    h = x
    for w in params:
        h = jnp.tanh(h @ w)
    return jnp.mean((h - y) ** 2)

@jax.jit
def train_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [w - 0.01 * g for w, g in zip(params, grads)]

@jax.jit
def solve(a, b):
    return jnp.linalg.solve(a, b)

k = jax.random.key(0)
small(jnp.ones((64, 64)), jnp.ones((64, 8))).block_until_ready()
params = [jax.random.normal(k, (256, 256)) * 0.05 for _ in range(4)]
train_step(params, jnp.ones((32, 256)), jnp.ones((32, 256)))[0].block_until_ready()
solve(jnp.eye(32) * 3 + 0.1, jnp.ones((32, 4))).block_until_ready()
"""
MODULES = {"small matmul": "jit_small", "MLP training step": "jit_train_step",
           "linear solve (LAPACK: needs jax)": "jit_solve"}  # fmt: skip


def dump_modules(work: Path) -> dict[str, Path]:
    dump = work / "dump"
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_proto"}  # fmt: skip
    subprocess.run([sys.executable, "-c", PROGRAM], env=env, check=True, capture_output=True)
    found = {}
    for label, name in MODULES.items():
        (path,) = dump.glob(f"module_*.{name}.before_optimizations.hlo.pb")
        found[label] = path
    return found


def timed(argv: list[str], through_jax: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != THROUGH_JAX}
    env["JAX_PLATFORMS"] = "cpu"
    if through_jax:
        env[THROUGH_JAX] = "1"
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 3):  # 3: the replay did not reproduce (a healthy module)
        raise SystemExit(f"{argv} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return wall


def child_argv(module: Path, work: Path, n: int) -> list[str]:
    out = work / f"out-{n}"
    out.mkdir()
    spec = {
        "extreme": None, "hlo": str(module), "snapshot": None, "mlir": None,
        "compile_options": None, "flags_given": False, "platform": "cpu", "use_data": True,
        "seed": 42, "out": str(out), "reference": True, "flags": [],
        "conservative": ["--xla_cpu_enable_fast_math=false"],
    }  # fmt: skip
    path = work / f"spec-{n}.json"
    path.write_text(json.dumps(spec))
    return [sys.executable, "-m", "xla_bugkit.replay.child.worker", str(path)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path, default=BENCH / "REPLAY_CHILD.md")
    args = p.parse_args()
    lines = [
        "| module | child: jaxlib alone | child: through jax | ratio "
        "| `replay`: alone | `replay`: through jax | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="replay-child-bench-") as tmp:
        work = Path(tmp)
        n = 0
        for label, module in dump_modules(work).items():
            times: dict[tuple[str, bool], list[float]] = {}
            for r in range(args.rounds):
                for through in (False, True) if r % 2 == 0 else (True, False):
                    n += 1
                    child = timed(child_argv(module, work, n), through)
                    command = timed([XLA_BUGKIT, "replay", "-q", str(module)], through)
                    times.setdefault(("child", through), []).append(child)
                    times.setdefault(("replay", through), []).append(command)
            med = {k: statistics.median(v) for k, v in times.items()}
            cells = [label]
            for what in ("child", "replay"):
                alone, jax = med[(what, False)], med[(what, True)]
                cells += [f"{alone:.2f} s", f"{jax:.2f} s", f"{alone / jax:.2f}x"]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    args.out.write_text(
        "# The replay child through jaxlib alone\n\n"
        "Medians of interleaved runs; generated inputs, references on (op by op and\n"
        "conservative), as verify and collect run them. Ratio: alone / through jax.\n\n"
        + text
        + f"\n    python benchmarks/replay_child_bench.py --rounds {args.rounds}\n"
    )


if __name__ == "__main__":
    main()
