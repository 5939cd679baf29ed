"""A replay buffer whose priorities come from a jitted function called every step.

What XLA does wrong (jax#39103, https://github.com/jax-ml/jax/issues/39103, jaxlib 0.10.2
on CPU): the priority of a slot is `sum((W @ row) ** 2)`, vmapped over the float64 buffer
of 16385 slots and jitted. XLA fuses the dot, multiply and reduce into one YNNPACK fusion
that, for the element just past the first 128 KiB of the output (slot 16384), returns the
value of another slot (the mechanism of tests/programs/wrong_result.py).

The buffer is a host-side numpy ring filled with 64 new transitions a step, and still-empty
slots are zero; `priorities` is called once a step, 300 times in all, so every call after the
first goes through jax's C++ fast path. While the slots near the end are empty, the slot
that XLA reads by mistake holds the same zeros and the result is right: the program's numpy
checks at steps 100 and 200 pass. At step 300 the buffer has wrapped and every slot holds
its own data, so the check finds slot 16384 wrong. XLA raises nothing.

The program prints `sanity: 0 mismatches` (the buffer's contents against a numpy mirror, a
check that passes), then on stderr `step 300: priorities differ from numpy at 1 of 16385
points (slot 16384: ...)`, and exits 1.

Bare run: exit status 1.
Expected answer: wrong result; culprit jit(priorities) (module jit_priorities), on its
newest inputs (its earlier executions, on a half-empty buffer, compute the right values);
the replay reproduces the wrong result.
"""

import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

CAPACITY = 16_385  # float64 priorities: slot 16384 is the first past 128 KiB
FEATURES = 3
BATCH = 64
STEPS = 300
CHECK_EVERY = 100

WHITEN = jnp.asarray(np.array([[1.0, 0.2, 0.0], [0.0, 0.9, 0.1], [0.3, 0.0, 1.1]]))


@jax.jit
def priorities(buffer):
    return jax.vmap(lambda row: jnp.sum((WHITEN @ row) ** 2))(buffer)


def main() -> int:
    rng = np.random.default_rng(0)
    buffer = np.zeros((CAPACITY, FEATURES))
    mirror = np.zeros((CAPACITY, FEATURES))
    position = 0
    drawn = np.zeros(CAPACITY, dtype=np.int64)
    for step in range(1, STEPS + 1):
        batch = rng.standard_normal((BATCH, FEATURES))
        slots = (position + np.arange(BATCH)) % CAPACITY
        buffer[slots] = batch
        mirror[slots] = batch
        position = (position + BATCH) % CAPACITY

        weights = np.asarray(priorities(buffer))
        drawn[rng.choice(CAPACITY, size=32, p=weights / weights.sum())] += 1

        if step % CHECK_EVERY == 0:
            expected = ((buffer @ np.asarray(WHITEN).T) ** 2).sum(axis=1)
            wrong = np.flatnonzero(~np.isclose(weights, expected, rtol=1e-9, atol=0.0))
            print(f"step {step}: {int((drawn > 0).sum())} slots sampled so far", flush=True)
            print(f"sanity: {int((buffer != mirror).sum())} mismatches", flush=True)
            if wrong.size:
                k = int(wrong[0])
                print(
                    f"step {step}: priorities differ from numpy at {wrong.size} of {CAPACITY} "
                    f"points (slot {k}: jit {weights[k]:.6g}, numpy {expected[k]:.6g})",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
    print("priorities match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
