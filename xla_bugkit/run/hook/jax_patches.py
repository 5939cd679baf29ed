"""The recorder's patches of private jax internals: the one place the hook touches them.
Which are made, and in what order, is here (``apply``); what each wrapper records is in
``jax_backend`` (the backend's start) and ``jax_calls`` (compilations and executions).

``xla_bugkit.jaxlib_adapter`` is the adapter the rest of xla-bugkit uses for private APIs,
but it cannot be imported here: this module runs inside the user's interpreter, which may
not have xla-bugkit installed, and importing it would cost the program time. So it keeps its
own small set of patches, each checked against the names it needs and skipped (with a
``hook_error`` record) when a jax release moved them. Checked against jax 0.10.2.

Patched, each wrapper calling the original with the same arguments and returning its result
or raising its exception unchanged (and left out of the tracebacks jax filters, as jax's own
frames are: ``traceback_util.register_exclusion``):

- ``xla_bridge._init_backend`` (``jax_backend``): before the first backend starts,
  collect's ``--xla_dump_to`` is moved to a folder of this process's own (``_own_dump_dir``)
  and XLA's cache flags are taken out (``caches``); afterwards, the ``backend`` record.
- ``compilation_cache.is_cache_used`` and ``is_persistent_cache_enabled``: always no, so the
  program's own compilation cache is neither read nor written (``caches``).
- ``compiler.compile_or_get_cached`` (``jax_calls``): ``compile`` / ``compiled`` records,
  with the XLA options the program passed to that compile (``options``).
- ``pjit._get_fastpath_data`` (``jax_calls``): none for a call whose inputs span several
  processes, so that every call of it comes through Python (and its shards are saved).
- nothing patched: the recorder's answer to collect's question before a stop
  (``waiting.state``) finds a call under way that took jax's C++ fast path.
- ``pxla.ExecuteReplicated.__call__`` (``jax_calls``): ``execute`` / ``executed`` records
  (``pending``, and later ``ready``, when the device was still computing as dispatch
  returned: ``ready.py``; ``fed``, the earlier executions whose outputs the call takes:
  ``outputs.py``), and the arguments (``args``) of multi-device executions, which XLA
  writes no snapshot of, and, when collect turned XLA's snapshots off, of each compiled
  function's first execution and of one that raises. Calls that jax's C++ fast path
  dispatches never reach Python and are not recorded; the first call of each compiled
  function always comes through here, and every call over several processes' devices. In
  the run collect starts for a Pallas kernel's reference, also the outputs of the first
  call of the module it names (``outputs``).
- in that run only, Pallas's TPU interpret mode, forced for the whole process before the
  program traces a kernel (``pallas_interpret``).
"""

from __future__ import annotations

import os
import re
from typing import Any

OLDEST = (0, 4, 30)  # older releases lay these internals out differently


def apply(recorder: Any) -> None:
    import jax

    version = tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:3])
    if version < OLDEST:
        recorder.write("hook_error", error=f"jax {jax.__version__} is older than the hook knows")
        return
    backend = recorder.load_sibling("jax_backend")
    calls = recorder.load_sibling("jax_calls")
    for patch in (
        _hide_own_frames,
        backend.quiet_jaxpr_dumps,
        _defeat_caches,
        backend.patch_backend,
        calls.patch_compile,
        calls.patch_fastpath,
        calls.patch_execute,
        calls.answer_state,
        _force_interpret,
    ):
        try:
            patch(recorder)
        except Exception as e:  # the others still help
            recorder.write("hook_error", error=f"{patch.__name__}: {type(e).__name__}: {e}")


def _hide_own_frames(recorder: Any) -> None:
    """The patches' wrappers stand between the program's call and jax's: jax's traceback
    filtering leaves them out, as it leaves out its own frames, so that the program's
    tracebacks read as they do without the hook."""
    from jax._src import traceback_util

    traceback_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)))


def _force_interpret(recorder: Any) -> None:
    """Pallas's TPU interpret mode for the whole process, in the run that asks for it only
    (``pallas_interpret``: a run that does not loads nothing for it)."""
    if os.environ.get("XLA_BUGKIT_PALLAS_INTERPRET"):
        recorder.load_sibling("pallas_interpret").force(recorder)


def _defeat_caches(recorder: Any) -> None:
    """The program's own compilation cache is neither read nor written (``caches``)."""
    recorder.load_sibling("caches").defeat(recorder)
