"""A two-stage trainer that re-executes itself with os.execve to change XLA's flags between stages.

`python two_stage.py` pretrains a small regression model (stage 1), saves a checkpoint, and
fine-tunes it with mixup augmentation (stage 2). XLA reads XLA_FLAGS once per process, when
jax starts its backend, and stage 2 runs in the author's "reference numerics" mode, so
after stage 1 the program replaces its own image with a fresh interpreter running this file
again: `os.execve(sys.executable, [sys.executable, this file], env)`, the same pid, a new
image, no child process. The new environment REPLACES XLA_FLAGS outright with the stage's
own set (whatever XLA_FLAGS held before is dropped, on purpose: stage 2 must not inherit
the tuning flags of stage 1):

    XLA_FLAGS=--xla_disable_hlo_passes=algsimp,copy-insertion

and adds TWO_STAGE_PHASE=finetune and TWO_STAGE_CHECKPOINT=<the .npz stage 1 wrote in the
temporary folder>. Stage 1 imports jax and runs its jitted steps before the exec; stage 2
imports jax afresh, evaluates the checkpoint (compiles and runs fine under the new flags),
then builds its first mixup batch (its random key made inside the jit,
`fold_in(key(7), epoch)`, split in two for the mixing weights and the permutation).

What XLA does wrong: with copy insertion off, buffer assignment finds two constants of
jax.random's threefry hash sharing a buffer, and XLA's CPU backend aborts while compiling
jit(mixup_batch) in the re-executed image (the bug of tests/programs/compile_options_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

SIGABRT kills the process, whose pid is the one stage 1 ran in. Stage 1's modules
(jit(pretrain_step) among them) compiled and ran fine under the default flags.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash, in the re-executed image (stage 2, same pid); culprit
jit(mixup_batch) (module jit_mixup_batch); the replay reproduces the crash under the flags
stage 2 ran with (the replaced XLA_FLAGS), not those the program was started with.
"""

import os
import sys
import tempfile

STAGE2_FLAGS = "--xla_disable_hlo_passes=algsimp,copy-insertion"
FEATURES = 6


def data(seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((512, FEATURES)).astype(np.float32)
    y = (np.tanh(x @ np.linspace(-1.0, 1.0, FEATURES)) + 0.05 * rng.standard_normal(512)).astype(
        np.float32
    )
    return x, y


def pretrain() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def pretrain_step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
        return w - 0.5 * grad, loss

    x, y = data(0)
    w = jnp.zeros(FEATURES)
    for step in range(40):
        w, loss = pretrain_step(w, x, y)
        if step % 10 == 9:
            print(f"stage 1 step {step + 1}: loss {float(loss):.4f}", flush=True)

    checkpoint = os.path.join(tempfile.gettempdir(), f"two_stage_{os.getpid()}.npz")
    np.savez(checkpoint, w=np.asarray(w))
    env = dict(os.environ)
    env["XLA_FLAGS"] = STAGE2_FLAGS  # the stage's own flags, not added to the old ones
    env["TWO_STAGE_PHASE"] = "finetune"
    env["TWO_STAGE_CHECKPOINT"] = checkpoint
    print(f"stage 1 done (pid {os.getpid()}): restarting with XLA_FLAGS={STAGE2_FLAGS}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)], env)


def finetune(checkpoint: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    with np.load(checkpoint) as saved:
        w = jnp.asarray(saved["w"])
    os.remove(checkpoint)
    print(f"stage 2 (pid {os.getpid()}): XLA_FLAGS={os.environ['XLA_FLAGS']}", flush=True)

    @jax.jit
    def evaluate(w, x, y):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

    @jax.jit
    def mixup_batch(epoch, x, y):
        key = jax.random.fold_in(jax.random.key(7), epoch)
        mix_key, perm_key = jax.random.split(key)
        lam = jax.random.beta(mix_key, 0.4, 0.4, (x.shape[0],))
        perm = jax.random.permutation(perm_key, x.shape[0])
        return lam[:, None] * x + (1 - lam[:, None]) * x[perm], lam * y + (1 - lam) * y[perm]

    @jax.jit
    def finetune_step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
        return w - 0.1 * grad, loss

    x, y = data(1)
    print(f"stage 2: checkpoint loss on new data {float(evaluate(w, x, y)):.4f}", flush=True)
    for epoch in range(3):
        mx, my = mixup_batch(epoch, x, y)
        w, loss = finetune_step(w, mx, my)
        print(f"stage 2 epoch {epoch}: mixup loss {float(loss):.4f}", flush=True)
    print(f"stage 2 done: loss {float(evaluate(w, x, y)):.4f}")


if __name__ == "__main__":
    if os.environ.get("TWO_STAGE_PHASE") == "finetune":
        finetune(os.environ["TWO_STAGE_CHECKPOINT"])
    else:
        pretrain()
