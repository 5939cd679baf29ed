"""Notebooks: the IPython extension (``%load_ext xla_bugkit``, then ``%xla_bugkit collect``).

XLA reads its flags once per process, so a kernel that already ran jax cannot turn dumps on
after a failure: the magic reruns the notebook's cells in a fresh Python process under
``collect``. IPython is imported only by the extension's own functions.
"""
