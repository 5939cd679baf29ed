"""The program's own on-disk caches, defeated for the run: nothing read, nothing written.

A program may turn on JAX's persistent compilation cache itself (``jax.config.update(
"jax_compilation_cache_dir", d)``, ``JAX_COMPILATION_CACHE_DIR``, ``set_cache_dir(d)``, and
``jax_enable_compilation_cache`` back on over collect's ``JAX_ENABLE_COMPILATION_CACHE=false``).
A hit would compile nothing and dump nothing; a miss (collect's dump flags change the key)
would write the run's executables into the user's folder. So jax's two questions, "is the
cache used" and "is the persistent cache enabled", are answered no for the whole run: the
second also keeps jax from pointing XLA's GPU caches (autotune results, kernels) into that
folder. Each folder the program asked for is recorded once (``cache_defeated``).

XLA's own GPU caches named in XLA_FLAGS are taken out of XLA_FLAGS before XLA reads it
(``without_cache_flags``), for the same reasons. Loaded by file path, as ``jax_patches`` is:
standard library only, and nothing may raise into the program.
"""

from __future__ import annotations

import os
import re
from typing import Any

# XLA flags that make XLA read and write a cache of the user's (GPU autotune results per
# fusion, compiled kernels); the autotune cache's mode means nothing without its folder.
CACHE_FLAGS = (
    "xla_gpu_per_fusion_autotune_cache_dir",
    "xla_gpu_kernel_cache_file",
    "xla_gpu_experimental_autotune_cache_mode",
)
# One flag of XLA_FLAGS as XLA reads it: one dash or two, its value up to the next space
# (quoted values included).
_FLAG = re.compile(
    r"(?:(?<=\s)|^)--?(?:" + "|".join(CACHE_FLAGS) + r")(?:=(?:'[^']*'|\"[^\"]*\"|\S*))?(?=\s|$)"
)


def without_cache_flags(value: str) -> tuple[str, list[str]]:
    """``value`` (XLA_FLAGS) less the flags that name one of XLA's caches, and those flags."""
    found = [m.group(0) for m in _FLAG.finditer(value)]
    if not found:
        return value, []
    return _FLAG.sub("", value).strip(), found


def defeat(recorder: Any) -> None:
    """Answer jax's cache questions no for this process, recording each cache folder the
    program asked for."""
    from jax._src import compilation_cache, config

    told: set[str] = set()

    def asked() -> None:
        try:
            folder = config.compilation_cache_dir.value
            if folder and folder not in told:
                told.add(folder)
                recorder.write("cache_defeated", cache="jax", folder=os.path.abspath(folder))
        except Exception:  # a jax without the option: the cache is defeated all the same
            pass

    def is_cache_used(backend: Any) -> bool:
        asked()
        return False

    def is_persistent_cache_enabled() -> bool:
        asked()
        return False

    setattr(compilation_cache, "is_cache_used", is_cache_used)  # noqa: B010  # a private name
    setattr(compilation_cache, "is_persistent_cache_enabled", is_persistent_cache_enabled)  # noqa: B010


def drop_cache_flags(recorder: Any) -> None:
    """Take XLA's cache flags out of XLA_FLAGS before XLA reads it, each recorded."""
    value, dropped = without_cache_flags(os.environ.get("XLA_FLAGS", ""))
    if dropped:
        os.environ["XLA_FLAGS"] = value
        for flag in dropped:
            recorder.write("cache_defeated", cache="xla", flag=flag)
