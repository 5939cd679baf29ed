"""VAE training, rerun with XLA's optimisations off while hunting a NaN.

Someone chasing a NaN in the ELBO followed advice from a forum thread and added
`--xla_disable_all_hlo_passes=true` to XLA_FLAGS "so that XLA does not fuse anything and
the NaN shows up where it happens". With it, XLA's CPU compiler aborts on a CHECK while
compiling the reparameterised train step (the random-number bits of `jax.random.normal`
leave a constant in a while loop that buffer assignment does not expect). The process
dies with SIGABRT before the first step. A crash under any flags is XLA's bug; without the
flag the step compiles and trains.
"""

import os

os.environ["XLA_FLAGS"] = (
    # NaN hunt, see #ml-infra
    os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"
).strip()

import jax
import jax.numpy as jnp
import numpy as np

LATENT = 8


def init(seed, d=64, h=128):
    rng = np.random.default_rng(seed)
    g = lambda s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)  # noqa: E731
    return {"enc": g((d, h)), "mu": g((h, LATENT)), "logvar": g((h, LATENT)), "dec": g((LATENT, d))}


def elbo(params, x, key):
    h = jnp.tanh(x @ params["enc"])
    mu, logvar = h @ params["mu"], h @ params["logvar"]
    eps = jax.random.normal(key, mu.shape)
    z = mu + jnp.exp(0.5 * logvar) * eps
    recon = jax.nn.sigmoid(z @ params["dec"])
    bce = -jnp.sum(x * jnp.log(recon + 1e-7) + (1 - x) * jnp.log(1 - recon + 1e-7), axis=1)
    kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar), axis=1)
    return jnp.mean(bce + kl)


@jax.jit
def train_step(params, x, step):
    key = jax.random.fold_in(jax.random.key(1234), step)
    loss, g = jax.value_and_grad(elbo)(params, x, key)
    return jax.tree.map(lambda p, d: p - 1e-3 * d, params, g), loss


def main():
    print(f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}", flush=True)
    data = (np.random.default_rng(0).random((512, 64)) > 0.7).astype(np.float32)
    params = init(42)
    step = 0
    for epoch in range(3):
        for i in range(0, len(data), 128):
            params, loss = train_step(params, data[i : i + 128], step)
            step += 1
            if not np.isfinite(float(loss)):
                raise FloatingPointError(f"ELBO went NaN at epoch {epoch} batch {i // 128}")
        print(f"epoch {epoch}: elbo {float(loss):.3f}", flush=True)


if __name__ == "__main__":
    main()
