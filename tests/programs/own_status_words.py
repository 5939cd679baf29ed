"""The program's own error, worded after XLA's: not XLA's.

A checksum job computes per-shard sums with jax (correctly), then checks the layout its
manifest promises and raises its own ``RuntimeError("INTERNAL: Check failed: ...")``, in the
style of the serving stack's C++ checks that its runbook greps for. XLA returned no error.
"""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def shard_sums(x, starts):
    shard = jnp.searchsorted(starts, jnp.arange(x.shape[0]), side="right") - 1
    return jax.ops.segment_sum(x.sum(axis=1), shard, num_segments=starts.shape[0])


def verify(rows: int, promised: int) -> None:
    per = -(-rows // promised)
    per = -(-per // 8) * 8  # shards start on an aligned row
    starts = np.arange(0, rows, per, dtype=np.int32)
    sums = np.asarray(shard_sums(jnp.ones((rows, 4), jnp.float32), jnp.asarray(starts)))
    if len(sums) != promised:
        raise RuntimeError(
            f"INTERNAL: Check failed: layout_ok (shards={len(sums)} promised={promised})"
        )
    print(f"{rows} rows: {len(sums)} shards, first sum {sums[0]}", flush=True)


verify(1024, 8)
verify(1000, 24)
