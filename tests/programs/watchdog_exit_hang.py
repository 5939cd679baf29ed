"""An asyncio service whose jitted recalibration never returns; its watchdog ends it.

`python watchdog_exit_hang.py` serves sensor recalibrations. Each runs the jitted
`recalibrate` in the event loop's executor thread (`loop.run_in_executor`), jitted with
per-jit compiler options of the service's own (`compiler_options=FAST`, not XLA_FLAGS).
`recalibrate` is a `fori_loop` over three sweeps; each grows the step size of a
least-squares fit by 1.5x until the loss overflows float32 (`jnp.isinf(loss)`), which
takes 38 steps on the service's data (114 for the three).

What XLA does: under those options (fast math, infinities not honoured) XLA's CPU backend
folds `jnp.isinf(loss)` to false, so the inner while loop's condition never turns false
and XLA's CPU runtime executes jit(recalibrate) without end; jitted without the options
the same function returns at once. The computation is small: XLA's CPU client runs it
inline, inside the executor thread's call, which never returns. The main thread waits in
the event loop; the watchdog thread logs "recalibration exceeded the 20s SLA" and calls
`os._exit(75)` while XLA is still running.

Bare run: exit status 75 after about 20 s (the watchdog; no Python exception).
Expected answer: a hang in jit(recalibrate), XLA executing it when the program ended
itself; the replay of jit_recalibrate under its options hangs as well, so the verdict rests
on the replay (and the module's loop is worth a look: it can only end on an infinity).
"""

import asyncio
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

SLA_SECONDS = 20.0
FAST = {
    "xla_cpu_enable_fast_math": True,
    "xla_cpu_fast_math_honor_infs": False,
    "xla_cpu_fast_math_honor_nans": False,
}
log = logging.getLogger("recalibration")


def recalibrate(x, y):
    """Three passes of a step-size sweep on the sensor's least-squares fit: each grows the
    step by 1.5x until the loss overflows, and counts the steps."""

    def loss_fn(w):
        return jnp.mean((x @ w - y) ** 2)

    def step(state):
        w, rate, _, steps = state
        loss, grad = jax.value_and_grad(loss_fn)(w)
        return w - rate * grad, rate * 1.5, jnp.isinf(loss), steps + 1

    def sweep(_, total):
        start = (jnp.zeros(x.shape[1]), jnp.float32(1e-4), jnp.bool_(False), jnp.int32(0))
        return total + jax.lax.while_loop(lambda state: ~state[2], step, start)[3]

    return jax.lax.fori_loop(0, 3, sweep, jnp.int32(0))


fast_recalibrate = jax.jit(recalibrate, compiler_options=FAST)


def watchdog(done: threading.Event) -> None:
    if not done.wait(SLA_SECONDS):
        log.error("recalibration exceeded the %.0fs SLA, restarting the service", SLA_SECONDS)
        os._exit(75)


async def serve(executor: ThreadPoolExecutor, x, y) -> None:
    loop = asyncio.get_running_loop()
    done = threading.Event()
    threading.Thread(target=watchdog, args=(done,), daemon=True).start()
    log.warning("recalibration: running")
    steps = await loop.run_in_executor(executor, lambda: int(fast_recalibrate(x, y)))
    done.set()
    log.warning("recalibration: done in %d steps", steps)


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((16, 4)), jnp.float32)
    y = x @ jnp.arange(4.0, dtype=jnp.float32)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="calibrator") as executor:
        asyncio.run(serve(executor, x, y))


if __name__ == "__main__":
    main()
