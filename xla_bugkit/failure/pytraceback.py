"""What a Python traceback in a run's output says, as the failure readers read it: a frame's
line, the files that are not the program's own, and XLA's errors as jax and jaxlib raise
them (``own_raise``: the program's own ``raise``; ``callback``: the program's host
callback)."""

from __future__ import annotations

import re

# One frame of a traceback Python printed.
FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fun>\S+)\s*$')
# jax's and jaxlib's own source.
JAX_OWN = re.compile(r"[/\\](?:jax|jaxlib)[/\\]")
# Files that are not the program's: jax's, an installed package's, the standard library's.
NOT_PROGRAM = re.compile(r"[/\\](?:jax|jaxlib|site-packages|dist-packages|python3\.\d+)[/\\]")
# XLA's errors as jax and jaxlib raise them: an exception line anywhere in an output (a
# chained cause included), and an exception's type name.
# Only jax's and jaxlib's own classes: checkify's ``jax._src.checkify.JaxRuntimeError`` is
# named like XLA's and raised by jax's Python for the program's failed check (``jax_use``).
_XLA_CLASS = (
    r"(?:(?:jax\.errors|jaxlib(?:\.\w+)*|jax\._src\.lib(?:\.\w+)*)\.)?"
    r"(?:XlaRuntimeError|JaxRuntimeError)"
)
XLA_RAISED = re.compile(rf"^{_XLA_CLASS}\b|^jax\.errors\.\w+:", re.M)
# An exception's type name that is XLA's error as jax or jaxlib raise it.
XLA_EXCEPTION = re.compile(rf"^{_XLA_CLASS}$")
XLA_TYPE = re.compile(r"XlaRuntimeError|JaxRuntimeError|jaxlib|^jax\.errors\.", re.I)
