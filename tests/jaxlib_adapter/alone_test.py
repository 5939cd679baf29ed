"""A replay child through jaxlib alone: it never imports jax, and gets jax's very bits.

Each test runs the real worker child on a real module and reads what it left: its arrays, and
whether jax was loaded when it exited. The same spec run through jax
(``XLA_BUGKIT_REPLAY_THROUGH_JAX``) is the reference: both paths compile the same module with
the same XLA, so their outputs must agree to the bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xla_bugkit.replay import protocol
from xla_bugkit.replay.child.worker import THROUGH_JAX

pytestmark = pytest.mark.jax  # replay children, and jax in this process to lower modules

# Runs the worker as its ``__main__`` does, then says whether jax is loaded as it ends.
_RUN_AND_TELL = """
import sys
from xla_bugkit.replay.child import worker
status = worker.main([sys.argv[1]])
print("JAX LOADED:", sys.modules.get("jax") is not None, flush=True)
sys.exit(status)
"""


def replay_child(
    tmp_path: Path, hlo_text: str, *, through_jax: bool, name: str
) -> tuple[str, Path]:
    """The worker's output for ``hlo_text`` (generated inputs, references on) and its folder."""
    out = tmp_path / name
    out.mkdir()
    module = tmp_path / f"{name}.txt"
    module.write_text(hlo_text)
    spec = {
        "extreme": None, "hlo": str(module), "snapshot": None, "mlir": None,
        "compile_options": None, "flags_given": False, "platform": "cpu", "use_data": True,
        "seed": 7, "out": str(out), "reference": True, "flags": [],
        "conservative": ["--xla_cpu_enable_fast_math=false"],
    }  # fmt: skip
    spec_path = tmp_path / f"{name}.json"
    spec_path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != THROUGH_JAX}
    if through_jax:
        env[THROUGH_JAX] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_TELL, str(spec_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, out


def lowered(fn: object, *args: object) -> str:
    import jax

    return str(jax.jit(fn).lower(*args).compiler_ir("hlo").as_hlo_text())  # type: ignore[arg-type]


def test_a_plain_module_replays_without_jax_and_agrees_with_jax_to_the_bit(
    tmp_path: Path,
) -> None:
    import jax
    import jax.numpy as jnp

    # Every kind of dtype the put and the read back must keep: bf16, f64, bool, s64, u8.
    with jax.enable_x64(True):
        text = lowered(
            lambda w, x, mask, n, b: (
                (jnp.tanh(w.astype(jnp.float32) @ x.astype(jnp.float32))).astype(jnp.bfloat16),
                jnp.where(mask, x * 2.0, -x).sum(axis=0),
                n * 3 + b.astype(jnp.int64),
            ),
            jnp.ones((8, 16), jnp.bfloat16),
            jnp.ones((16, 4), jnp.float64),
            jnp.ones((16, 4), bool),
            jnp.ones((5,), jnp.int64),
            jnp.ones((5,), jnp.uint8),
        )
    alone_out, alone_dir = replay_child(tmp_path, text, through_jax=False, name="alone")
    jax_out, jax_dir = replay_child(tmp_path, text, through_jax=True, name="jax")
    assert "JAX LOADED: False" in alone_out
    assert "JAX LOADED: True" in jax_out
    for which in (protocol.TEST, protocol.CONSERVATIVE, protocol.OPBYOP):
        alone = protocol.load_arrays(protocol.arrays_path(alone_dir, which))
        through = protocol.load_arrays(protocol.arrays_path(jax_dir, which))
        assert [a.dtype.name for a in alone] == ["bfloat16", "float64", "int64"], which
        for a, b in zip(alone, through, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), which


def test_a_module_that_needs_jax_gets_it_in_the_same_child(tmp_path: Path) -> None:
    import jax.numpy as jnp

    # LAPACK's kernels are registered by jax, and segfault unless it sets them up.
    x = jnp.eye(4) * 2 + 0.5
    text = lowered(jnp.linalg.inv, x)
    assert 'custom_call_target="lapack_' in text
    output, out = replay_child(tmp_path, text, through_jax=False, name="lapack")
    assert "JAX LOADED: True" in output
    (test,) = protocol.load_arrays(protocol.arrays_path(out, protocol.TEST))
    (opbyop,) = protocol.load_arrays(protocol.arrays_path(out, protocol.OPBYOP))
    np.testing.assert_allclose(test, opbyop, rtol=1e-5)
