"""Nightly calibration job: solve each strike's cube-root moneyness by bisection.

`calibrate` (jitted) runs a vectorised bisection in `lax.while_loop` until every
bracket is narrower than `tol`. The job asks for tol=1e-6 in float32 on roots near 126,
where adjacent float32 values are 7.6e-6 apart: once a bracket is one ulp wide its
midpoint rounds to an end point and the width never shrinks again. The loop never ends
for this data (the program's own condition). The job's watchdog thread gives the solve
20 s, then logs and calls `os._exit(3)`, so the process exits while XLA is still
executing the loop. A replay of `jit(calibrate)` on the same inputs loops forever too.
"""

import logging
import os
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

log = logging.getLogger("calib")
DEADLINE_S = 20.0


@jax.jit
def calibrate(targets, lo, hi, tol):
    def cond(state):
        lo, hi = state
        return jnp.any(hi - lo > tol)

    def body(state):
        lo, hi = state
        mid = 0.5 * (lo + hi)
        below = mid * mid * mid < targets
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = lax.while_loop(cond, body, (lo, hi))
    return 0.5 * (lo + hi)


def watchdog(done):
    if not done.wait(DEADLINE_S):
        log.error("calibration exceeded its %.0fs deadline; aborting the nightly job", DEADLINE_S)
        logging.shutdown()
        os._exit(3)


def main():
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    strikes = np.linspace(1.9e6, 2.1e6, 64).astype(np.float32)
    lo = np.full_like(strikes, 100.0)
    hi = np.full_like(strikes, 150.0)
    done = threading.Event()
    threading.Thread(target=watchdog, args=(done,), daemon=True, name="watchdog").start()
    t0 = time.time()
    log.info("calibrating %d strikes (tol=1e-6)", strikes.size)
    roots = calibrate(strikes, lo, hi, np.float32(1e-6)).block_until_ready()
    done.set()
    log.info(
        "calibrated in %.1fs, max residual %.3g",
        time.time() - t0,
        float(np.max(np.abs(roots**3 - strikes))),
    )


if __name__ == "__main__":
    main()
