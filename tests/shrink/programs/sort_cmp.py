"""Compile crash in XLA:CPU's code generator, not in an HLO pass (jaxlib 0.10.2, CPU).

Public report: https://github.com/openxla/xla/issues/47366 ("Crash on CPU: map_util.h:50
it != collection.end() Map key not found"), explained in openxla/xla PR #48160: a sort
whose comparator calls a computation (here a reduce, whose reducer is ``add``) is emitted
without the computations it calls, and the emitter's lookup of the reducer dies. JAX has no
public way to give ``sort`` such a comparator, so the program compiles a StableHLO module
through JAX's CPU client: written here after the report's description (the report's own
module came from a fuzzer); its comparator orders by ``sum(x * iota(4)) = 6x``, a valid
ordering. Measured here (jax/jaxlib 0.10.2): the process aborts while compiling with
``map_util.h:50] Check failed: it != collection.end() Map key not found: region_1.1, true``,
also with ``--xla_disable_all_hlo_passes=true``.
"""

import jax
import numpy as np
from jax.extend.backend import get_backend
from jaxlib import xla_client

MODULE = """
module @jit_sort_by_sum {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %sorted = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %i = stablehlo.iota dim = 0 : tensor<4xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %va = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %wa = stablehlo.multiply %va, %i : tensor<4xf32>
      %ka = stablehlo.reduce(%wa init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %vb = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %wb = stablehlo.multiply %vb, %i : tensor<4xf32>
      %kb = stablehlo.reduce(%wb init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %less = stablehlo.compare LT, %ka, %kb : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %less : tensor<i1>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    return %sorted : tensor<8xf32>
  }
}
"""

backend = get_backend("cpu")
device = backend.devices()[0]
executable = backend.compile_and_load(
    MODULE, xla_client.DeviceList((device,)), xla_client.CompileOptions()
)
x = np.array([3, 1, 2, 0, 7, 5, 4, 6], np.float32)
results = executable.execute_sharded([jax.device_put(x, device)])
print(np.asarray(results.disassemble_into_single_device_arrays()[0][0]))
