"""A sharded evaluation of a bag-of-words intent classifier, 2 processes of 2 CPU devices
each; one host's tokenizer emits a token id one past the vocabulary's end.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

The embedding table (512 tokens x 32) is sharded by vocabulary rows over a ("shards",) mesh
of all 4 devices, 128 tokens per device; the batch of utterances (64 per device, 24 token
ids each) is sharded by rows over the same mesh. ``score_batch`` looks the ids up with
``jnp.take(table, ids, axis=0)``, whose documented default gives a row of NaN for an id past
the table's end, zeroes such rows with ``jnp.nan_to_num`` (an unknown token adds nothing to
the bag), mean-pools, and returns each utterance's log-probability of its labelled intent,
all under ``jax.jit``. Each process checks its own utterances' scores. The program sets XLA's
CPU fast-math flags for speed, as the team's eval launcher does:
``--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false``.

Host 0's tokenizer maps every word into the vocabulary. Host 1's tokenizer is one release
newer: it maps words it does not know to id 512, one past the end of the last device's shard
of the table (the vocabulary file it was built for has that extra row; the table does not).

What goes wrong: with those flags XLA:CPU (jaxlib 0.10.2) compiles the lookup under LLVM's
no-NaNs assumption, so the ``isnan`` test inside ``nan_to_num`` folds to false and the NaN
row of the out-of-range id reaches the pooling. No error is raised. The utterances of
host 1 that hold id 512 score NaN, and process 1's check exits 1 (SystemExit with a
message); process 0's utterances, all ids inside the table, score right, and it exits 0.
Without the two flags the same program scores every utterance (the unknown tokens count as
zeros). Culprit: jit(score_batch), a wrong result on process 1's rows only.
"""

import os
import sys

RANK, PROCESSES, PORT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DEVICES_PER_PROCESS = 2
FAST_MATH = "--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={DEVICES_PER_PROCESS} {FAST_MATH}"
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}", num_processes=PROCESSES, process_id=RANK
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

VOCAB, WIDTH, INTENTS = 512, 32, 7
TOKENS, UTTERANCES_PER_DEVICE = 24, 64
UNKNOWN_RATE = 0.02  # share of words the newer tokenizer does not know


def tokenize(host: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """This host's utterances as token ids, and their labelled intents (made, no files)."""
    rng = np.random.default_rng(77 + host)
    ids = rng.integers(0, VOCAB, (rows, TOKENS)).astype(np.int32)
    if host == 1:  # the newer tokenizer: unknown words get the id after the last word
        ids[rng.random((rows, TOKENS)) < UNKNOWN_RATE] = VOCAB
    return ids, rng.integers(0, INTENTS, rows).astype(np.int32)


@jax.jit
def score_batch(table: jax.Array, head: jax.Array, ids: jax.Array, intent: jax.Array):
    vectors = jnp.nan_to_num(jnp.take(table, ids, axis=0))  # unknown ids: NaN rows -> 0
    logits = jnp.tanh(vectors.mean(axis=1)) @ head
    logp = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logp, intent[:, None], axis=1)[:, 0]


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("shards",))
    by_row = NamedSharding(mesh, PartitionSpec("shards"))
    rng = np.random.default_rng(5)
    table_np = rng.normal(0, 1.0, (VOCAB, WIDTH)).astype(np.float32)
    table = jax.make_array_from_callback(table_np.shape, by_row, lambda i: table_np[i])
    head = jax.device_put(
        rng.normal(0, WIDTH**-0.5, (WIDTH, INTENTS)).astype(np.float32),
        NamedSharding(mesh, PartitionSpec()),
    )
    mine = UTTERANCES_PER_DEVICE * DEVICES_PER_PROCESS
    n_rows, start = mine * PROCESSES, mine * RANK
    ids_np, intent_np = tokenize(RANK, mine)
    ids = jax.make_array_from_callback(
        (n_rows, TOKENS), by_row, lambda i: ids_np[i[0].start - start : i[0].stop - start]
    )
    intent = jax.make_array_from_callback(
        (n_rows,), by_row, lambda i: intent_np[i[0].start - start : i[0].stop - start]
    )
    print(
        f"process {RANK}/{PROCESSES}: {mine} utterances, ids {ids_np.min()}..{ids_np.max()} "
        f"(table holds 0..{VOCAB - 1}, {VOCAB // len(jax.devices())} per device)",
        flush=True,
    )

    scores = score_batch(table, head, ids, intent)
    got = np.concatenate([np.asarray(s.data) for s in scores.addressable_shards])
    bad = np.flatnonzero(~np.isfinite(got))
    if bad.size:
        sys.exit(
            f"EVAL FAILED: {bad.size} of {got.size} utterances of host {RANK} scored "
            f"{got[bad[0]]!r} (utterance {start + bad[0]})"
        )
    print(f"process {RANK}: mean log-probability {got.mean():.4f}; eval done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
