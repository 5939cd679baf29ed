"""A jax.export round trip: export a bfloat16 classifier, serialize it, deserialize the
bytes as a serving process would, and call the restored function.

What XLA does wrong: the program runs XLA with every HLO pass off
(`--xla_disable_all_hlo_passes=true`, appended to XLA_FLAGS before jax starts, to serve
the exported StableHLO exactly as written). Without the passes that upcast a bfloat16 dot
(XLA:CPU's dot emitter takes no bfloat16 operands), compiling the restored function fails a
RET_CHECK in XLA's CPU dot emitter:

    jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure
    (external/xla/xla/service/cpu/dot_op_emitter.cc:1124) PRED == type || S8 == type || ...

Exporting only lowers to StableHLO; XLA first compiles the classifier when the restored
function is called, so that call is where it fails. jax compiles the call of an Exported as
`jit(call_exported)` (module jit_call_exported), whatever the exported function's name. The
float32 and conversion work before it (the weights, the input batch) compiles and runs under
the same flag.

`Exported.serialize` and `export.deserialize` need the flatbuffers package, which jax does
not depend on: where it is missing, the program says so and calls the Exported it holds, which
compiles the same module and fails the same way.

Bare run: exit status 1 (uncaught JaxRuntimeError), with or without flatbuffers.
Expected answer: compile error; culprit jit(call_exported) (module jit_call_exported, the
restored classifier); the replay reproduces the error.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np
from jax import export

FEATURES, HIDDEN, CLASSES, BATCH = 32, 64, 10, 16


def classify(params, x):
    hidden = jax.nn.relu(x @ params["w1"])
    return jnp.argmax(hidden @ params["w2"], axis=-1)


def weights() -> dict[str, jax.Array]:
    rng = np.random.default_rng(0)
    return {
        "w1": jnp.asarray(rng.standard_normal((FEATURES, HIDDEN)) / 6.0).astype(jnp.bfloat16),
        "w2": jnp.asarray(rng.standard_normal((HIDDEN, CLASSES)) / 8.0).astype(jnp.bfloat16),
    }


def main() -> None:
    params = weights()
    x = jnp.asarray(np.random.default_rng(1).standard_normal((BATCH, FEATURES))).astype(
        jnp.bfloat16
    )
    exported = export.export(jax.jit(classify))(params, x)
    try:
        blob = exported.serialize()
    except ImportError:  # serialization needs the flatbuffers package, not a jax dependency
        print("flatbuffers is not installed: calling the Exported without the bytes")
        restored = exported
    else:
        print(f"exported classify: {len(blob)} bytes for {exported.platforms}", flush=True)
        restored = export.deserialize(blob)
    labels = restored.call(params, x)
    print("predicted classes:", np.asarray(labels).tolist())


if __name__ == "__main__":
    main()
