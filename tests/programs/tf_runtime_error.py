"""TensorFlow runtime error inside XLA: a tf.function(jit_compile=True) with a random op.

With --xla_disable_all_hlo_passes=true, TF's XLA CPU backend compiles the module but cannot
run it: `OP_REQUIRES failed at xla_ops.cc:602 : UNIMPLEMENTED: RngBitGenerator should be
expanded for CPU.`, then `UnimplementedError: ... [Op:__inference_f_NN]` (tensorflow-cpu 2.21).
The program appends its flag to XLA_FLAGS, as many training scripts do.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import tensorflow as tf


@tf.function(jit_compile=True)
def f(x):
    return tf.reduce_sum(tf.tanh(x) * 2.0 + tf.random.stateless_normal([4], seed=[1, 2]))


print(f(tf.ones([4])))
