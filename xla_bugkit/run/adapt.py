"""The rerun's environment for the framework the program uses (``frameworks``): XLA's dump
flags work the same under all three, but TensorFlow's ``tf.function(jit_compile=True)``
segfaults at its first run with ``--xla_dump_hlo_snapshots``, and each framework logs what it
compiles only when asked."""

from __future__ import annotations

from collections.abc import Mapping

from xla_bugkit.failure import xla_log
from xla_bugkit.frameworks import Framework
from xla_bugkit.hlo import flags

SNAPSHOT_FLAG = "--xla_dump_hlo_snapshots"
# TF_CPP_VMODULE entries: TensorFlow logs the function each XLA launch runs
# ("XlaLocalLaunchOpBase::Compute __inference_f_13[...]"); PyTorch/XLA logs the graph hash
# around each compilation and execution ("Compiling IR graph hash H on device CPU:0 ..." and
# "... done!"), which tells an XLA error from a Python one (``ptxla_log``).
_TF_VMODULE: Mapping[str, int] = {"xla_ops": 1}
_TORCH_VMODULE: Mapping[str, int] = {"xla_graph_executor": 3}
PT_XLA_DEBUG_LEVEL = "PT_XLA_DEBUG_LEVEL"


def adapt(
    env: Mapping[str, str], merged: flags.MergedFlags, framework: Framework | None
) -> tuple[dict[str, str], flags.MergedFlags]:
    """The rerun's environment and XLA flags (as made for JAX) adapted to ``framework``."""
    env = dict(env)
    if framework is Framework.TENSORFLOW:
        merged = _without_snapshots(merged)
        env["XLA_FLAGS"] = merged.value
        env[xla_log.VMODULE] = xla_log.merge_vmodule(env.get(xla_log.VMODULE), _TF_VMODULE)
    elif framework is Framework.PYTORCH_XLA:
        # The graph hash and the Python line that made each compilation.
        env.setdefault(PT_XLA_DEBUG_LEVEL, "1")
        # PyTorch/XLA raises the log level to 1 itself unless told; XLA's INFO lines name
        # each module it dumps, torch_xla's each graph it compiles and runs.
        env.setdefault(xla_log.MIN_LOG_LEVEL, "0")
        env[xla_log.VMODULE] = xla_log.merge_vmodule(env.get(xla_log.VMODULE), _TORCH_VMODULE)
    return env, merged


# PT_XLA_DEBUG_LEVEL's analyses, and the dated INFO lines of torch_xla and its XLA.
_TORCH_ANALYSIS = rb"(?:Post )?Compilation Analysis: |Computation hash: "
_DATED_INFO = rb"\d{4}-\d\d-\d\d [\d:.]+: I "


def hidden_on_terminal(base: Mapping[str, str], framework: Framework | None) -> bytes | None:
    """Lines the rerun's settings for ``framework`` add to what the program would print by
    itself, as a pattern for the start of a line (run.log keeps them): PyTorch/XLA's
    analyses unless the user asked for them, and its INFO lines unless the user set a log
    level. None: nothing to hide."""
    if framework is not Framework.PYTORCH_XLA:
        return None
    hidden = [_TORCH_ANALYSIS] if PT_XLA_DEBUG_LEVEL not in base else []
    if xla_log.MIN_LOG_LEVEL not in base:
        hidden.append(_DATED_INFO)
    return b"|".join(hidden) or None


def _without_snapshots(merged: flags.MergedFlags) -> flags.MergedFlags:
    kept = tuple(f for f in merged.flags if flags.name_of(f) != SNAPSHOT_FLAG)
    note = (
        f"{SNAPSHOT_FLAG} is left out for TensorFlow (it crashes jit_compile functions at "
        "their first run): the capture hook records their inputs instead"
    )
    return flags.MergedFlags(kept, merged.user_flags, (*merged.notes, note))
