"""Nightly parity check: the jitted turnover statistics against the numpy reference.

Computes, per desk, the running notional (cumulative sum of signed fills) and its
drawdown from the running peak, with a jitted float32 kernel, and compares the
result with a numpy reference before the numbers go to the risk dashboard.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

N_DESKS = 4
N_FILLS = 1_000_000
RTOL = 1e-6  # the dashboard shows 6 significant digits


def synth_fills(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(mean=3.0, sigma=1.2, size=(N_DESKS, N_FILLS))
    sides = rng.choice([-1.0, 1.0], size=(N_DESKS, N_FILLS), p=[0.48, 0.52])
    return (sizes * sides).astype(np.float32)


@jax.jit
def turnover_stats(fills):
    running = jnp.cumsum(fills, axis=1)
    peak = jax.lax.cummax(running, axis=1)
    drawdown = peak - running
    return running[:, -1], drawdown.max(axis=1), jnp.abs(fills).sum(axis=1)


def reference_stats(fills: np.ndarray):
    # The reference works in double precision "to be safe".
    f64 = fills.astype(np.float64)
    running = np.cumsum(f64, axis=1)
    peak = np.maximum.accumulate(running, axis=1)
    return running[:, -1], (peak - running).max(axis=1), np.abs(f64).sum(axis=1)


def main() -> int:
    fills = synth_fills(20251207)
    got = [np.asarray(a) for a in turnover_stats(jnp.asarray(fills))]
    want = reference_stats(fills)
    names = ("net notional", "max drawdown", "gross notional")
    for name, g in zip(names, got, strict=True):
        print(f"{name:>15}: " + "  ".join(f"{v:14.2f}" for v in g))
    bad = []
    for name, g, w in zip(names, got, want, strict=True):
        try:
            np.testing.assert_allclose(g, w, rtol=RTOL, err_msg=f"{name} drifted from reference")
        except AssertionError as err:
            bad.append(str(err))
    if bad:
        print("PARITY CHECK FAILED - not publishing to dashboard", file=sys.stderr)
        for msg in bad:
            print(msg, file=sys.stderr)
        return 1
    print("parity ok; published")
    return 0


if __name__ == "__main__":
    sys.exit(main())
