"""Module names as the program knows them.

The TPU compiler appends its build to the name of every module it dumps
(``module_0000.jit_step.cl_933746096.before_optimizations.txt``): the function JAX compiled
is ``jit_step``. File names keep the suffix; whatever matches a dumped module to the
program's own records, or names it to a person, reads the name without it.
"""

from __future__ import annotations

import re

_BUILD = re.compile(r"\.cl_\d+$")


def program_name(module_name: str) -> str:
    """``jit_step.cl_933746096`` -> ``jit_step``; any other name as it is."""
    return _BUILD.sub("", module_name)


def function_name(module_name: str) -> str:
    """``jit_train_step`` -> ``jit(train_step)``: how JAX's own log names the function."""
    name = program_name(module_name)
    m = re.fullmatch(r"(jit|pmap|xla_pmap)_(.+)", name)
    return f"{m.group(1)}({m.group(2)})" if m else name


def module_name(label: str) -> str:
    """``module_0006.jit_train_step`` -> ``jit_train_step`` (the name may itself hold dots)."""
    return label.split(".", 1)[1] if label.startswith("module_") and "." in label else label
