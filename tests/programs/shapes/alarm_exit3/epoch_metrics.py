"""Training with an epoch-end metrics check that raises its own alarm and exits 3.

`python epoch_metrics.py` trains a 3-feature projection head (float32, plain SGD under jit)
for two epochs over 32769 examples. After each epoch it computes every example's feature
energy through the head, `vmap(lambda row: sum((P @ row) ** 2))` under jit, for the
drift monitor, and cross-checks the energies against a float64 numpy reference. On a
mismatch it prints its own alarm line on stderr, `ALARM: feature energy drift check failed
...`, and exits with status 3 (the monitor's "metrics corrupted" code, which the scheduler
treats differently from a crash).

What XLA does wrong (jax#39103, https://github.com/jax-ml/jax/issues/39103, the bug of
tests/programs/wrong_result.py and ynn_regression_wrong.py): jaxlib 0.10.2's CPU backend
fuses the per-row matrix-vector product, square and sum into one YNNPACK fusion that
writes another row's value into element 32768, the first one past 128 KiB of the float32
output. Example 32768's energy is wrong; the other 32768 match numpy to float32 rounding.
XLA raises nothing. The training steps and the loss are right.

Bare run: exit status 3 (sys.exit(3) after the ALARM line, at the end of epoch 0).
Expected answer: wrong result; culprit jit(feature_energy) (module jit_feature_energy);
the replay reproduces the wrong result.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

EXAMPLES = 32_769  # float32 energies: example 32768 is the first past 128 KiB of output
FEATURES = 3
BATCH = 1024
EPOCHS = 2
LEARNING_RATE = 0.05


@jax.jit
def train_step(head, x, y):
    loss, grad = jax.value_and_grad(lambda h: jnp.mean((x @ h.T - y) ** 2))(head)
    return head - LEARNING_RATE * grad, loss


@jax.jit
def feature_energy(head, x):
    return jax.vmap(lambda row: jnp.sum((head @ row) ** 2))(x)


def check_energies(epoch: int, head: np.ndarray, x: np.ndarray, energy: np.ndarray) -> None:
    reference = ((x.astype(np.float64) @ head.astype(np.float64).T) ** 2).sum(axis=1)
    bad = np.flatnonzero(~np.isclose(energy, reference, rtol=1e-4, atol=1e-6))
    if bad.size:
        k = int(bad[0])
        print(
            f"ALARM: feature energy drift check failed at epoch {epoch}: {bad.size} of "
            f"{x.shape[0]} examples differ from numpy (example {k}: jit {energy[k]:.6g}, "
            f"numpy {reference[k]:.6g})",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(3)


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    target = np.array([[1.0, 0.3, 0.0], [0.0, 0.8, 0.2], [0.1, 0.0, 1.2]], np.float32)
    y = x @ target.T + 0.01 * rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    head = jnp.eye(FEATURES, dtype=jnp.float32)
    for epoch in range(EPOCHS):
        order = rng.permutation(EXAMPLES)
        losses = []
        for start in range(0, EXAMPLES - BATCH + 1, BATCH):
            batch = order[start : start + BATCH]
            head, loss = train_step(head, x[batch], y[batch])
            losses.append(float(loss))
        print(f"epoch {epoch}: mean loss {np.mean(losses):.5f}", flush=True)
        energy = np.asarray(feature_energy(head, x))
        print(f"epoch {epoch}: mean feature energy {energy.mean():.4f}", flush=True)
        check_energies(epoch, np.asarray(head), x, energy)
    print("metrics: all checks passed")


if __name__ == "__main__":
    main()
