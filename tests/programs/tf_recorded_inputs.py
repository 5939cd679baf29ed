"""A TensorFlow jit_compile function whose inputs only the capture hook can record.

TensorFlow writes no HLO snapshot on CPU. f(x)[k] = sum((M @ (x[k] + offset)) ** 2) with
M = eye(3) over 16385 float64 rows, x[k] = (k, 0, 0) and ``offset`` a captured variable:
the module's parameters are (x, offset, M) (the input, then the captures), and the real
values are recognisable in a bundle. It is the shape of jax#39103's YNN miscompile, but
neither TensorFlow 2.21 nor a jaxlib 0.10.2 replay of TensorFlow's module computes it
wrongly (TensorFlow's dot/transpose lowering does not form the faulty fusion), so the
program checks its result against NumPy and exits 0: ``collect --always`` bundles it.
"""

import numpy as np
import tensorflow as tf

N = 16385
offset = tf.Variable(np.zeros(3), dtype=tf.float64)
matrix = tf.constant(np.eye(3))


@tf.function(jit_compile=True)
def f(x):
    rows = tf.linalg.matvec(matrix, x + offset)
    return tf.reduce_sum(rows * rows, axis=1)


i = np.arange(N, dtype=np.float64)
x = np.stack((i, np.zeros_like(i), np.zeros_like(i)), axis=1)
got = f(tf.constant(x)).numpy()
want = np.sum(x**2, axis=1)
bad = np.flatnonzero(~np.isclose(got, want))
print("first wrong elements:", bad[:5], got[bad[:5]], want[bad[:5]])
if bad.size:
    raise SystemExit(f"wrong result: {bad.size} of {N} elements differ")
print("the result is right")
