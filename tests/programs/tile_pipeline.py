# Copy of benchmarks/heldout5/tile_pipeline.py: test data of tests/collecting/own_callback_test.py.
"""Orthophoto tile pipeline: the parent plans shards, one worker process per shard.

The parent computes the per-shard exposure targets with jax, then starts
`python tile_worker.py SHARD TARGET` for each shard and gathers the statistics
each worker prints as its last line.
"""

import json
import signal
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

N_SHARDS = 4
WORKER = Path(__file__).with_name("tile_worker.py")


@jax.jit
def exposure_targets(histograms):
    cdf = jnp.cumsum(histograms, axis=1) / histograms.sum(axis=1, keepdims=True)
    median_bin = jnp.argmax(cdf >= 0.5, axis=1)
    return 0.5 * (median_bin.astype(jnp.float32) / histograms.shape[1]) + 0.25


def run_shard(shard: int, target: float) -> dict:
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(shard), f"{target:.6f}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        if proc.returncode < 0:
            how = f"killed by {signal.Signals(-proc.returncode).name}"
        else:
            how = f"exit status {proc.returncode}"
        tail = "\n".join(proc.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"tile worker for shard {shard} failed ({how}); its last words:\n{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    rng = np.random.default_rng(5)
    hist = rng.integers(1, 500, size=(N_SHARDS, 256)).astype(np.float32)
    targets = np.asarray(exposure_targets(jnp.asarray(hist)))
    print("exposure targets:", np.round(targets, 3).tolist(), flush=True)
    results = []
    for shard, target in enumerate(targets):
        try:
            stats = run_shard(shard, float(target))
        except RuntimeError as err:
            print(f"pipeline aborted: {err}", file=sys.stderr)
            print(f"{len(results)} of {N_SHARDS} shards done; rerun with --resume", file=sys.stderr)
            return 1
        print(f"shard {shard}: {stats}", flush=True)
        results.append(stats)
    print("all shards done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
