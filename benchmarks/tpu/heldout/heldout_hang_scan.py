"""Greedy decoding with a tiny 2-layer recurrent language model, run until every sequence
in the batch has produced the end-of-sequence token.

The loop in jit(generate) is a lax.while_loop over "not all sequences finished", with a
fori_loop over the layers inside its body. EOS_ID is set to VOCAB (one past the last
token id), so argmax never returns it: the exit condition never becomes true, and the
program hangs inside the device computation (there is no max-length guard).
"""

import jax
import jax.numpy as jnp
import numpy as np

VOCAB, HIDDEN, LAYERS, BATCH, MAX_LEN = 1000, 256, 2, 16, 64
EOS_ID = VOCAB  # bug: should be a token id inside the vocabulary, e.g. VOCAB - 1


def init(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "embed": jax.random.normal(k1, (VOCAB, HIDDEN)) * 0.1,
        "cells": jax.random.normal(k2, (LAYERS, 2 * HIDDEN, HIDDEN)) / np.sqrt(2 * HIDDEN),
        "head": jax.random.normal(k3, (HIDDEN, VOCAB)) / np.sqrt(HIDDEN),
    }


@jax.jit
def generate(params, prompt):
    def layer(i, carry):
        x, h = carry
        new = jnp.tanh(jnp.concatenate([x, h[i]], -1) @ params["cells"][i])
        return new, h.at[i].set(new)

    def not_done(state):
        return ~jnp.all(state[3])

    def step(state):
        tok, h, out, done, t = state
        x, h = jax.lax.fori_loop(0, LAYERS, layer, (params["embed"][tok], h))
        tok = jnp.argmax(x @ params["head"], axis=-1)
        out = out.at[:, t % MAX_LEN].set(jnp.where(done, EOS_ID, tok))
        return tok, h, out, done | (tok == EOS_ID), t + 1

    h = jnp.zeros((LAYERS, prompt.shape[0], HIDDEN))
    out = jnp.zeros((prompt.shape[0], MAX_LEN), jnp.int32)
    state = (prompt, h, out, jnp.zeros(prompt.shape, bool), 0)
    return jax.lax.while_loop(not_done, step, state)[2]


params = init(jax.random.key(0))
prompt = jnp.asarray(np.random.default_rng(0).integers(0, VOCAB, BATCH), jnp.int32)
print(f"decoding {BATCH} sequences until EOS (id {EOS_ID})", flush=True)
tokens = np.asarray(generate(params, prompt))
print("first sequence:", tokens[0].tolist())
