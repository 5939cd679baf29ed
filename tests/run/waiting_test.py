"""Asking a running program what it waits for (``ask``, ``hook.waiting``): real programs
whose later call of a jitted function never ends, which jax dispatches from C++ without the
hook seeing it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import READY_TIMEOUT, hooked_env, wait_for_file
from xla_bugkit.run import ask, evidence, evidence_files

pytestmark = pytest.mark.jax

# Its second call never ends: the loop adds a rate of 0. XLA's CPU client runs so small a
# computation before the call returns, so the program's thread is inside the call.
INSIDE_THE_CALL = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp

    @jax.jit
    def ramp(rate):
        return jax.lax.while_loop(lambda x: x < 1.0, lambda x: x + rate, jnp.float32(0.0))

    print(float(ramp(jnp.float32(0.25))), flush=True)
    rate = jnp.float32(0.0)
    open(sys.argv[1], "w").close()
    print(float(ramp(rate)))
    """
)

# The same, its second call made by a worker thread: ``pool.submit(ramp, rate)``, which the
# worker calls as ``self.fn(*self.args, **self.kwargs)``.
IN_A_WORKER = textwrap.dedent(
    """
    import sys
    from concurrent.futures import ThreadPoolExecutor
    import jax, jax.numpy as jnp

    @jax.jit
    def ramp(rate):
        return jax.lax.while_loop(lambda x: x < 1.0, lambda x: x + rate, jnp.float32(0.0))

    print(float(ramp(jnp.float32(0.25))), flush=True)
    with ThreadPoolExecutor(2) as pool:
        future = pool.submit(ramp, jnp.float32(0.0))
        open(sys.argv[1], "w").close()
        print(float(future.result()[()]))
    """
)

# A larger computation runs after its call has returned: the program waits on the outputs.
AWAITING_ITS_OUTPUTS = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    import numpy as np

    @jax.jit
    def solve(a, b, tolerance):
        d = jnp.diag(a)
        def step(state):
            x, _ = state
            x = (b - (a @ x - d * x)) / d
            return x, jnp.max(jnp.abs(a @ x - b))
        init = (jnp.zeros_like(b), jnp.float32(jnp.inf))
        return jax.lax.while_loop(lambda s: s[1] > tolerance, step, init)

    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((64, 64)) * 0.1 + 4.0 * np.eye(64), jnp.float32)
    b = jnp.asarray(rng.standard_normal(64), jnp.float32)
    x, residual = solve(a, b, jnp.float32(1e-4))
    print(float(residual), flush=True)
    tolerance = jnp.float32(1e-9)
    x, residual = solve(a, b, tolerance)
    open(sys.argv[1], "w").close()
    print(float(residual))
    """
)

# Not stuck in XLA: a Python loop that calls a jitted function again and again.
CALLING_IN_A_LOOP = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 0.999 + 0.001

    x = step(jnp.ones(256))
    open(sys.argv[1], "w").close()
    while True:
        x = step(x)
    """
)


def asked(tmp_path: Path, program: str) -> evidence.ProcessEvidence:
    """Run ``program`` under the hook until it writes its ready file, ask it, stop it."""
    (tmp_path / "program.py").write_text(program)
    ready = tmp_path / "ready"
    folder = tmp_path / evidence_files.PROCESSES
    with subprocess.Popen(
        [sys.executable, "program.py", str(ready)], env=hooked_env(tmp_path), cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) as p:  # fmt: skip
        try:
            wait_for_file(ready, ended=lambda: p.poll() is not None)
            assert ask.ask(folder, wait=READY_TIMEOUT) == 1
        finally:
            p.kill()
    ask.forget(folder)
    assert not list(folder.glob("*.ask"))
    (process,) = evidence_files.load(tmp_path)
    return process


def saved(event: evidence.Event) -> list[np.ndarray]:
    assert event.args is not None
    with np.load(event.args) as arrays:
        return [arrays[f"arr_{i}"] for i in range(len(arrays.files))]


def test_a_later_call_inside_xla_is_found_with_its_own_arguments(tmp_path: Path) -> None:
    process = asked(tmp_path, INSIDE_THE_CALL)
    busy = process.unfinished
    assert busy is not None and busy.kind == "execute" and busy.module == "jit_ramp"
    assert "its thread was inside the call ramp(rate) at program.py:12" in busy.seen
    # The hung call's argument, not the first call's 0.25.
    (rate,) = saved(busy)
    assert rate.dtype == np.float32 and rate.shape == () and float(rate) == 0.0


def test_a_call_a_worker_thread_makes_is_found_with_its_spread_arguments(
    tmp_path: Path,
) -> None:
    process = asked(tmp_path, IN_A_WORKER)
    busy = process.unfinished
    assert busy is not None and busy.module == "jit_ramp"
    assert "inside the call self.fn(*self.args, **self.kwargs) at thread.py:" in busy.seen
    (rate,) = saved(busy)
    assert float(rate) == 0.0


def test_a_later_call_whose_outputs_never_come_is_found_with_its_arguments(
    tmp_path: Path,
) -> None:
    process = asked(tmp_path, AWAITING_ITS_OUTPUTS)
    busy = process.unfinished
    assert busy is not None and busy.module == "jit_solve"
    assert busy.seen.startswith("arrays it returns were still being computed")
    assert "its arguments are those of the call solve(a, b, tolerance) at program.py:22" in (
        busy.seen
    )
    a, b, tolerance = saved(busy)
    assert a.shape == (64, 64) and b.shape == (64,)
    assert tolerance == np.float32(1e-9)


def test_a_loop_of_calls_is_not_a_call_under_way(tmp_path: Path) -> None:
    process = asked(tmp_path, CALLING_IN_A_LOOP)
    assert process.unfinished is None
    assert all(not e.seen for e in process.events)


def test_a_process_that_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "123.ask")
    (tmp_path / "123.jsonl").write_text("")
    assert ask.ask(tmp_path, wait=READY_TIMEOUT) == 0  # nobody reads the FIFO: no wait
    ask.forget(tmp_path)
    assert not (tmp_path / "123.ask").exists()


def test_the_hooks_listening_thread_is_left_out_of_the_stack(tmp_path: Path) -> None:
    stack = (
        "Thread 0x00007fa9d61106c0 (most recent call first):\n"
        '  File "/opt/env/site-packages/xla_bugkit/run/hook/recorder.py", line 113 in '
        "_answering\n"
        '  File "/usr/lib/python3.11/threading.py", line 982 in run\n'
        "\n"
        "Current thread 0x00007fa9ef866b80 (most recent call first):\n"
        '  File "/home/u/sweep.py", line 56 in calibrate\n'
    )
    (tmp_path / "7.jsonl").write_text('{"e": "start", "t": 1.0, "pid": 7, "ppid": 1}\n')
    (tmp_path / "7.stack.txt").write_text(stack)
    (process,) = evidence_files.read(tmp_path)
    assert process.stack == (
        "Current thread 0x00007fa9ef866b80 (most recent call first):\n"
        '  File "/home/u/sweep.py", line 56 in calibrate\n'
    )
