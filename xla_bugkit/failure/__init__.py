"""How a run failed, read from what it printed: ``classify`` (the ``Failure`` record, its
kind and phase), ``fatal`` (the line that killed a process, and its signal), ``stopped`` (a
run stopped from outside, and its hang), ``kinds`` (each kind of failure and what it means
to every stage), ``signature`` (what makes two failures the same bug), ``xla_status`` (XLA's
status lines), ``compile_log`` (JAX's compile log), ``value_check`` (a program's own check of
its numbers), ``xla_log`` (XLA's INFO lines: what it dumped, when), ``ptxla_log``
(PyTorch/XLA's graph log). Nothing is imported here."""
