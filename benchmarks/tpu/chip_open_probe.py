"""Where a TPU replay child's time goes, and whether a second process can use the chip while
the first holds it: what "one chip open for all replays" can rest on.

Run on a TPU machine: python3 benchmarks/tpu/chip_open_probe.py
Prints one line per measurement; the figures go to benchmarks/TPU.md.
"""

import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax
t1 = time.perf_counter()
status = "opened"
try:
    devices = jax.devices()
except Exception as e:  # a probe reports whatever happened
    status = f"{type(e).__name__}: {str(e)[:300]}"
t2 = time.perf_counter()
first = None
if status == "opened":
    import jax.numpy as jnp
    y = jax.jit(lambda x: (x @ x).sum())(jnp.ones((256, 256)))
    y.block_until_ready()
    first = time.perf_counter() - t2
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "first_jit": first, "status": status}))
if len(sys.argv) > 1:
    # Hold the chip until told to let go (a line on stdin).
    print("HOLDING", flush=True)
    sys.stdin.readline()
"""


def child(hold: bool = False) -> subprocess.Popen:
    argv = [sys.executable, "-c", CHILD] + (["hold"] if hold else [])
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def timed(label: str, hold: bool = False) -> subprocess.Popen:
    start = time.perf_counter()
    proc = child(hold)
    line = proc.stdout.readline()
    ready = round(time.perf_counter() - start, 2)
    print(label, "process start to ready:", ready, "s", line.strip())
    return proc


# 1. A cold child: python start, import jax, open the chip, one small jit.
start = time.perf_counter()
p = timed("cold child")
p.wait()
print("cold child whole:", round(time.perf_counter() - start, 2), "s")

# 2. A second process while the first holds the chip.
holder = timed("holder", hold=True)
print("holder says:", holder.stdout.readline().strip())
start = time.perf_counter()
second = child()
try:
    out, _ = second.communicate(timeout=120)
    print("second while held:", round(time.perf_counter() - start, 2), "s", out.strip()[-400:])
except subprocess.TimeoutExpired:
    second.kill()
    print("second while held: still waiting after 120 s")
# 3. The holder lets go: how long its exit takes, then a fresh child's opening.
start = time.perf_counter()
holder.stdin.write("\n")
holder.stdin.flush()
holder.wait()
print("holder exit:", round(time.perf_counter() - start, 2), "s")
start = time.perf_counter()
p = timed("after the holder")
p.wait()
print("after the holder whole:", round(time.perf_counter() - start, 2), "s")

# 4. In one process: import jax, open, then compile and run a module from HLO text through
#    the public jax path (jax.jit of a function), ten times: what a replay costs with the
#    chip already open.
t0 = time.perf_counter()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.devices()
t1 = time.perf_counter()
times = []
for n in range(5):
    f = jax.jit(lambda x, n=n: jnp.tanh(x @ x + n).sum())
    s = time.perf_counter()
    f(jnp.ones((512, 512))).block_until_ready()
    times.append(round(time.perf_counter() - s, 3))
print(json.dumps({"in_process_open": round(t1 - t0, 2), "compile_and_run_each": times}))
