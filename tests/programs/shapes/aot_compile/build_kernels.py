"""Ahead-of-time compilation of a model's kernels, each in two builds; one fails to compile.

`python build_kernels.py` compiles its serving functions ahead of time with
`jax.jit(f).lower(*shapes).compile(...)`, nothing run, as a service does at start-up: each
function gets an optimised build and a reference build compiled with every HLO pass off
(`compiler_options={"xla_disable_all_hlo_passes": True}`, passed to this one compile, not
through XLA_FLAGS), whose numerics the service compares against in its self-test. It prints
each build's FLOPs as it goes.

What XLA does wrong: the optimised builds of `embed`, `predict` and `predict_bf16` and the
reference builds of `embed` and `predict` compile. The reference build of `predict_bf16`, a
bfloat16 matrix product, fails in XLA's CPU backend (the dot emitter has no case for bf16
when no pass has rewritten the dot first):

    jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure
    (external/xla/xla/service/cpu/dot_op_emitter.cc:1124) PRED == type || S8 == type || ...

Two modules named jit_predict_bf16 are compiled: the optimised one, which is fine, and the
reference one, which fails.

Bare run: exit status 1 (uncaught JaxRuntimeError).
Expected answer: compile error; culprit the reference build of jit(predict_bf16) (module
jit_predict_bf16, the second one, compiled with the option); the replay reproduces the error.
"""

import jax
import jax.numpy as jnp

REFERENCE = {"xla_disable_all_hlo_passes": True}
BATCH, FEATURES, CLASSES = 32, 64, 10


def embed(tokens, table):
    return jnp.take(table, tokens, axis=0).mean(axis=1)


def predict(x, w):
    return jax.nn.softmax(x @ w, axis=-1)


def predict_bf16(x, w):
    return jax.nn.softmax((x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32))


KERNELS = {
    "embed": (
        embed,
        jax.ShapeDtypeStruct((BATCH, 8), jnp.int32),
        jax.ShapeDtypeStruct((1000, FEATURES), jnp.float32),
    ),
    "predict": (
        predict,
        jax.ShapeDtypeStruct((BATCH, FEATURES), jnp.float32),
        jax.ShapeDtypeStruct((FEATURES, CLASSES), jnp.float32),
    ),
    "predict_bf16": (
        predict_bf16,
        jax.ShapeDtypeStruct((BATCH, FEATURES), jnp.float32),
        jax.ShapeDtypeStruct((FEATURES, CLASSES), jnp.float32),
    ),
}


def flops(compiled) -> float:
    cost = compiled.cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost).get("flops", 0.0))


def main() -> None:
    builds = {}
    for build, options in (("optimised", None), ("reference", REFERENCE)):
        for name, (fn, *shapes) in KERNELS.items():
            compiled = jax.jit(fn).lower(*shapes).compile(compiler_options=options)
            builds[name, build] = compiled
            print(f"compiled {name} ({build}): {flops(compiled):.0f} flops", flush=True)
    print(f"{len(builds)} builds ready")


if __name__ == "__main__":
    main()
