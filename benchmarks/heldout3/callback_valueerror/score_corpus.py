"""Corpus scoring whose host callback rejects a corrupt batch with ValueError: the program's bug.

`python score_corpus.py` scores shards of a tokenized corpus with a small bag-of-embeddings
classifier. Each batch goes through one jitted step, `score_batch`, which asks the host for
the inverse document frequency of every token with `jax.pure_callback(idf_weights, ...)`
(the frequency table lives in numpy on the host and is refreshed between shards), weights
the token embeddings with it and returns the batch's mean score and positive rate. The
callback validates the batch before it looks anything up: a token id outside the
vocabulary raises `ValueError: batch has token id 70000 outside the vocabulary (32000)`.

What goes wrong: shard 2's reader hands over a batch with a corrupt record (a token id of
70000, past the 32000-token vocabulary). The program's own `idf_weights` raises ValueError
on the host while XLA's CPU runtime is executing jit(score_batch); jax logs
`jax.pure_callback failed` with the ValueError's traceback, and XLA passes the failure on
as the status of the execution, which jax raises at the call as a ValueError of its own:

    ValueError: INTERNAL: CpuCallback error calling callback: Traceback ...
    ValueError: batch has token id 70000 outside the vocabulary (32000)

The job runner catches it, prints `scoring failed in shard 2, batch 1: ...` on stderr and
exits with status 2. XLA compiles and runs jit(score_batch) correctly: it called the
program's callback, and the callback refused the data. The error is the program's (its own
validation of a corrupt input), not XLA's.

Bare run: exit status 2 (the runner's sys.exit(2); no Python traceback of the runner).
Expected answer: not an XLA bug (non-XLA failure: the program's own callback raised
ValueError); the failure surfaced in jit(score_batch) (module jit_score_batch), and no
replay shows XLA at fault.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

VOCAB = 32_000
DIM = 16
BATCH, LENGTH = 8, 24


class IdfTable:
    """Document frequencies kept on the host, refreshed as shards are read."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.doc_freq = rng.integers(1, 5_000, VOCAB).astype(np.float64)
        self.documents = 10_000

    def refresh(self, tokens: np.ndarray) -> None:
        for row in tokens:
            self.doc_freq[np.unique(row)] += 1
        self.documents += tokens.shape[0]

    def idf_weights(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens)
        if tokens.min() < 0 or tokens.max() >= VOCAB:
            raise ValueError(
                f"batch has token id {int(tokens.max())} outside the vocabulary ({VOCAB})"
            )
        return np.log(self.documents / self.doc_freq[tokens]).astype(np.float32)


def make_scorer(table: IdfTable):
    @jax.jit
    def score_batch(embeddings, head, tokens):
        idf = jax.pure_callback(
            table.idf_weights, jax.ShapeDtypeStruct(tokens.shape, jnp.float32), tokens
        )
        pooled = (
            jnp.sum(embeddings[tokens] * idf[..., None], axis=1) / jnp.sum(idf, axis=1)[:, None]
        )
        scores = jax.nn.sigmoid(pooled @ head)
        return jnp.mean(scores), jnp.mean(scores > 0.5)

    return score_batch


def read_shard(rng: np.random.Generator, shard: int) -> list[np.ndarray]:
    batches = [rng.integers(0, VOCAB, (BATCH, LENGTH)).astype(np.int32) for _ in range(3)]
    if shard == 2:
        batches[1][5, 17] = 70_000  # a corrupt record in the raw data
    return batches


def main() -> int:
    rng = np.random.default_rng(0)
    table = IdfTable(rng)
    score_batch = make_scorer(table)
    embeddings = jnp.asarray(rng.standard_normal((VOCAB, DIM)) * 0.1, jnp.float32)
    head = jnp.asarray(rng.standard_normal(DIM), jnp.float32)
    for shard in range(4):
        means = []
        for number, tokens in enumerate(read_shard(rng, shard)):
            try:
                mean, positive = score_batch(embeddings, head, jnp.asarray(tokens))
                means.append(float(mean))
            except Exception as error:  # the runner reports any failure, then stops
                reason = str(error).strip().splitlines()[-1]
                print(f"scoring failed in shard {shard}, batch {number}: {reason}", file=sys.stderr)
                return 2
            table.refresh(tokens)
        print(
            f"shard {shard}: mean score {np.mean(means):.4f}, positive rate {float(positive):.3f}"
        )
    print("corpus scored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
