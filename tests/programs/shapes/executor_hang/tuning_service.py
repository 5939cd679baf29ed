"""An asyncio tuning service: a learning-rate range test, jitted with fast-math options, never ends.

`python tuning_service.py` serves learning-rate range tests. Each request runs the jitted
`lr_range_test` in the event loop's ThreadPoolExecutor (`loop.run_in_executor`), so the loop
stays responsive: plain gradient descent on a least-squares problem, growing the learning
rate by 1.5x each step until the loss diverges (`jnp.isnan(loss) | jnp.isinf(loss)`), and
reports the last stable rate. The function is jitted with per-jit compiler options for
speed, `jax.jit(lr_range_test, compiler_options={"xla_cpu_enable_fast_math": True,
"xla_cpu_fast_math_honor_nans": False, "xla_cpu_fast_math_honor_infs": False})`, not
through XLA_FLAGS. A watchdog thread gives each request 20 seconds, then ends the process
with `os._exit(75)` (EX_TEMPFAIL, so the supervisor restarts the service).

What XLA does wrong: under those options XLA's CPU backend treats NaN and infinity as
impossible and folds the divergence test in the loop body to false, so the while loop's
condition, `~diverged`, stays true after the loss has overflowed: XLA's CPU runtime executes
jit(lr_range_test) without end. Jitted without the options the same loop stops after 38
steps (`self-check: diverged after 38 steps, stable lr 218.4`): the service runs the plain
jit first, as its self-check, then the fast one, which hangs. Both compile to a module
named jit_lr_range_test; the one at fault is the second, compiled under the options.

The executor thread runs XLA; the main thread waits in the event loop; the watchdog prints
`watchdog: request lr-range-test still running after 20 s, exiting` and calls os._exit(75).

Bare run: exit status 75, after about 20 s (the watchdog; no Python exception).
Expected answer: hang, with XLA executing jit(lr_range_test) (module jit_lr_range_test)
when the watchdog ended the process; the replay under the per-jit options reproduces the hang.
"""

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

WATCHDOG_SECONDS = 20.0
FAST = {
    "xla_cpu_enable_fast_math": True,
    "xla_cpu_fast_math_honor_nans": False,
    "xla_cpu_fast_math_honor_infs": False,
}


def lr_range_test(x, y, lr):
    def loss_fn(w):
        return jnp.mean((x @ w - y) ** 2)

    def step(state):
        w, lr, _, steps = state
        loss, grad = jax.value_and_grad(loss_fn)(w)
        diverged = jnp.isnan(loss) | jnp.isinf(loss)
        return w - lr * grad, lr * 1.5, diverged, steps + 1

    start = (jnp.zeros(x.shape[1]), lr, jnp.bool_(False), jnp.int32(0))
    _, lr, _, steps = jax.lax.while_loop(lambda state: ~state[2], step, start)
    return lr / 1.5**2, steps


checked_range_test = jax.jit(lr_range_test)
fast_range_test = jax.jit(lr_range_test, compiler_options=FAST)


def run_request(range_test, x, y, lr0: float) -> tuple[float, int]:
    """Runs in an executor thread, and waits there for XLA's result."""
    lr, steps = range_test(x, y, jnp.float32(lr0))
    return float(lr), int(steps)


def watchdog(name: str, done: threading.Event) -> None:
    if not done.wait(WATCHDOG_SECONDS):
        print(
            f"watchdog: request {name} still running after {WATCHDOG_SECONDS:.0f} s, exiting",
            flush=True,
        )
        os._exit(75)


async def serve(executor: ThreadPoolExecutor, x, y) -> None:
    loop = asyncio.get_running_loop()
    lr, steps = await loop.run_in_executor(executor, run_request, checked_range_test, x, y, 1e-4)
    print(f"self-check: diverged after {steps} steps, stable lr {lr:.4g}", flush=True)

    done = threading.Event()
    threading.Thread(target=watchdog, args=("lr-range-test", done), daemon=True).start()
    started = time.monotonic()
    print("request lr-range-test: running with fast math", flush=True)
    lr, steps = await loop.run_in_executor(executor, run_request, fast_range_test, x, y, 1e-4)
    done.set()
    print(f"request lr-range-test: stable lr {lr:.4g} after {steps} steps")
    print(f"request lr-range-test: answered in {time.monotonic() - started:.1f} s")


def main() -> None:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((256, 8)), jnp.float32)
    y = x @ jnp.arange(8.0)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="solver") as executor:
        asyncio.run(serve(executor, x, y))


if __name__ == "__main__":
    main()
