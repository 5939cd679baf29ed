"""What Pallas's TPU interpret mode gives on the chip for a kernel that returns wrong values
compiled (benchmarks/tpu/programs/pallas_dma_zeros.py, jax-ml/jax#39744): does the
interpret mode exist in this jax, can it be forced for a whole program from outside it (as
collect's start-up hook would), does it give the right values, and how long it takes.
Run on a TPU machine: python3 benchmarks/tpu/pallas_interpret_probe.py"""

import contextlib
import inspect
import runpy
import sys
import time
from pathlib import Path

import jax
from jax.experimental.pallas import tpu as pltpu

print("jax", jax.__version__, "devices", jax.devices())
force = getattr(pltpu, "force_tpu_interpret_mode", None)
print("force_tpu_interpret_mode:", force is not None)
if force is not None:
    print("  signature:", inspect.signature(force))
    print("  doc:", (force.__doc__ or "").strip().splitlines()[:6])
print("InterpretParams:", hasattr(pltpu, "InterpretParams"))
names = [n for n in dir(jax.config) if "interpret" in n.lower() or "pallas" in n.lower()]
print("config names with pallas/interpret:", names)
values = getattr(jax.config, "values", {})
print("config values:", {k: v for k, v in values.items() if "pallas" in k or "interpret" in k})

program = Path(__file__).parent / "programs" / "pallas_dma_zeros.py"


def run(label, ctx):
    start = time.perf_counter()
    try:
        with ctx:
            runpy.run_path(str(program), run_name="__main__")
        outcome = "exit 0"
    except SystemExit as e:
        outcome = f"SystemExit({e.code!r})"
    except Exception as e:  # a probe reports whatever happened
        outcome = f"{type(e).__name__}: {str(e)[:300]}"
    print(f"{label}: {outcome} in {time.perf_counter() - start:.1f} s", flush=True)


run("compiled", contextlib.nullcontext())
if force is not None:
    run("interpret (forced around the whole program)", force())
    # What a module lowered under interpret mode holds: a replay needs none of the program's
    # Python, so host callbacks in it would make it unreplayable without the program.
    import re

    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    call = pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
    x = jnp.ones((8, 128), jnp.float32)
    for label, ctx in (("compiled", contextlib.nullcontext()), ("interpret", force())):
        with ctx:
            text = jax.jit(call).lower(x).as_text()
        targets = sorted(set(re.findall(r"custom_call @([\w.]+)", text)))
        print(f"lowered {label}: custom calls {targets}, {len(text)} chars")
sys.stdout.flush()
