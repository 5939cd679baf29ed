"""Silent wrong result from XLA:CPU in jax/jaxlib 0.10.2.

Public report: https://github.com/jax-ml/jax/issues/39103
"[CPU] jax.jit returns wrong results for vmapped matrix-vector product
followed by reduction" (regression: correct in 0.10.1, wrong in 0.10.2).

The program computes f(x)[k] = sum((M @ x[k]) ** 2) with M = eye(3), which is
just sum(x[k] ** 2). Under jax.jit on CPU, XLA in jaxlib 0.10.2 fuses the dot,
multiply and reduce into one YNNPACK fusion (`__ynn_fusion`). For the issue's
shapes (float64 n=16385, float32 n=32769), the element just past the first
128 KiB of the output (index 16384 or 32768) holds the value of another row.
With the issue's input x[k] = (k, 0, 0), that gives 16320**2 instead of
16384**2 on the machine where this was checked. The issue reporter got
16368**2, so which row is read depends on the CPU. No error or warning is
raised. The same function run op by op (jax.disable_jit) and NumPy both give
the right value. Passing XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=
(an empty list) turns the YNN fusion off, and the jitted result is then correct.

Exit status: 0 if the jitted result matches the reference, 1 (SystemExit) if not.
"""

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def make_f(dtype):
    matrix = jnp.eye(3, dtype=dtype)

    def f(x):
        return jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(x)

    return f


def issue_input(dtype, n):
    # Exactly the input from the issue: row k is (k, 0, 0).
    i = np.arange(n, dtype=dtype)
    return np.stack((i, np.zeros_like(i), np.zeros_like(i)), axis=1)


def random_input(dtype, n):
    # Same shape, seeded normal data: the misplaced row is then far off.
    return np.random.default_rng(0).standard_normal((n, 3)).astype(dtype)


def check(dtype, n, x_np, label):
    x = jnp.asarray(x_np)
    f = make_f(dtype)

    jitted = np.asarray(jax.jit(f)(x))
    with jax.disable_jit():
        eager = np.asarray(f(x))
    reference = ((x_np @ np.eye(3, dtype=dtype).T) ** 2).sum(axis=1)

    bad = np.flatnonzero(~np.isclose(jitted, reference, rtol=1e-5, atol=0.0))
    abs_err = np.abs(jitted - reference)
    rel_err = abs_err / np.maximum(np.abs(reference), 1.0)
    name = f"{np.dtype(dtype).name} n={n} {label}"
    k = bad[0] if bad.size else n - 1
    print(
        f"{name}: [{k}] jit={float(jitted[k])!r} eager={float(eager[k])!r} "
        f"numpy={float(reference[k])!r}"
    )
    print(
        f"{name}: eager matches numpy: "
        f"{bool(np.allclose(eager, reference, rtol=1e-5, atol=0.0))}; "
        f"jit mismatches: {bad.size}/{n} "
        f"(first index {bad[0] if bad.size else None}); "
        f"max abs err {abs_err.max():.6g}, max rel err {rel_err.max():.6g}"
    )
    if bad.size:
        return (
            f"{name}: {bad.size} wrong elements, max abs err "
            f"{abs_err.max():.6g}, max rel err {rel_err.max():.6g}"
        )
    return None


def main():
    print("jax", jax.__version__, "devices", jax.devices())
    failures = []
    # Sizes from the issue: one element past 128 KiB of output.
    for dtype, n in ((np.float64, 16_385), (np.float32, 32_769)):
        for make, label in ((issue_input, "issue-input"), (random_input, "seeded-normal")):
            failure = check(dtype, n, make(dtype, n), label)
            if failure:
                failures.append(failure)
    if failures:
        raise SystemExit("wrong result: jax.jit differs from eager/numpy: " + "; ".join(failures))
    print("ok: jitted result matches the reference")


if __name__ == "__main__":
    main()
