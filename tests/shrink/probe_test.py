"""The probe server: per-probe XLA_FLAGS, timeouts, and no child outliving its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import READY_TIMEOUT, clean_env
from xla_bugkit.replay import protocol
from xla_bugkit.shrink.probe import ForkServer

from .conftest import SPLIT_COUNT

pytestmark = pytest.mark.slow  # the server imports jax (seconds, more on a loaded machine)

LOG_EXP = """HloModule m

ENTRY e {
  x = f32[3] parameter(0)
  ex = f32[3] exponential(x)
  ROOT l = f32[3] log(ex)
}
"""


def _spec(folder: Path, hlo: Path) -> dict[str, object]:
    folder.mkdir(parents=True, exist_ok=True)
    protocol.save_arrays(folder / "args.npz", [np.array([88, 89, 100], np.float32)])
    return {"task": "run", "hlo": str(hlo), "args": str(folder / "args.npz"),
            "platform": "cpu", "overrides": []}  # fmt: skip


def test_each_probe_gets_its_own_flags(tmp_path: Path) -> None:
    hlo = tmp_path / "m.hlo"
    hlo.write_text(LOG_EXP)
    spec = _spec(tmp_path, hlo)
    with ForkServer(clean_env()) as server:
        crashed = server.run(tmp_path / "a", spec, xla_flags=SPLIT_COUNT, timeout=READY_TIMEOUT)
        clean = server.run(tmp_path / "b", spec, xla_flags="", timeout=READY_TIMEOUT)
    # The first child's flag made XLA abort; the next child, forked after it, never saw it.
    assert crashed.returncode == -signal.SIGABRT
    assert "std::length_error" in crashed.output
    assert clean.returncode == 0
    (out,) = protocol.load_arrays(tmp_path / "b" / "outputs.npz")
    assert out.tolist() == [88, 89, 100]  # algsimp's fold of log(exp(x)), the real bug


def test_a_probe_past_its_timeout_is_killed(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written.hlo"
    os.mkfifo(fifo)  # the child blocks reading it: a hang that needs no XLA
    with ForkServer(clean_env()) as server:
        run = server.run(tmp_path / "p", _spec(tmp_path, fifo), xla_flags="", timeout=1.0)
    assert run.timed_out
    assert run.returncode == -signal.SIGKILL


PARENT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from xla_bugkit.shrink.probe import ForkServer
    spec = {"task": "run", "hlo": sys.argv[1], "args": "-", "platform": "cpu"}
    server = ForkServer()
    print(server._popen.pid, flush=True)
    server.run(Path(sys.argv[2]), spec, xla_flags="", timeout=3600)
    """
)


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            found.append(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_server_and_probe_die_with_a_killed_parent(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written.hlo"
    os.mkfifo(fifo)
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(fifo), str(tmp_path / "p")],
        env=clean_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    server = int(parent.stdout.readline())
    deadline = time.monotonic() + READY_TIMEOUT
    while not (probes := _children(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert probes, "the server never forked its probe"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60
    while any(map(_alive, [server, *probes])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, [server, *probes]))
