"""A job script that sends its own stderr to a log file, then crashes XLA.

`python augment_job.py` does what some job scripts do to keep a cluster's console clean:
it opens a log file (`augment_job-PID.log` in the temp dir) and puts it on fd 2 with
`os.dup2`, so everything written to stderr from then on, by Python or by C++ code, goes to
the file. It prints where the log is, and its progress, on stdout. It turns every HLO pass
off (`--xla_disable_all_hlo_passes=true`, appended to XLA_FLAGS before jax starts, its
"reference numerics" mode).

What XLA does wrong: compiling jit(augment), which draws jax.random.normal, XLA's CPU
backend aborts while emitting the constants of the random-number computation (the bug of
tests/programs/compile_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

That line, and the rest of XLA's fatal report, go to the log file: the terminal (and a
tool reading the program's stderr) sees nothing of it. The last line on stdout is
`step 2: augmenting`.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash; culprit jit(augment) (module jit_augment; jit(center),
compiled before it, is fine); the replay reproduces the crash.
"""

import os
import tempfile
from pathlib import Path

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"


def send_stderr_to(path: Path) -> None:
    log = path.open("w")
    os.dup2(log.fileno(), 2)  # C++ code (XLA's logging) writes to fd 2, not to sys.stderr


log_path = Path(tempfile.gettempdir()) / f"augment_job-{os.getpid()}.log"
print(f"stderr goes to {log_path}", flush=True)
send_stderr_to(log_path)

import jax  # noqa: E402  the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


@jax.jit
def center(x):
    return x - jnp.mean(x, axis=0)


@jax.jit
def augment(x, key):
    return x + 0.1 * jax.random.normal(key, x.shape)


def main() -> None:
    images = jnp.asarray(np.random.default_rng(0).uniform(size=(64, 16)), jnp.float32)
    print("step 1: centering", flush=True)
    images = center(images)
    print(f"step 1: done, max |mean| {float(jnp.abs(images.mean(axis=0)).max()):.2e}", flush=True)
    print("step 2: augmenting", flush=True)
    images = augment(images, jax.random.key(0))
    print(f"step 2: done, std {float(images.std()):.3f}", flush=True)


if __name__ == "__main__":
    main()
