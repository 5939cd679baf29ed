"""Two ``jax.distributed`` ranks on localhost CPU, started by this script as their launcher;
rank 1 fails inside XLA, rank 0 waits for it at a barrier until the launcher stops it.

Rank 1 appends ``--xla_disable_all_hlo_passes=true`` to its own XLA_FLAGS: compiling a
random-number computation then aborts on a CHECK (see compile_crash.py). The launcher, as
real ones do, stops the other rank once one has failed, and exits with the failed status.

Run: python two_ranks.py (launcher), or python two_ranks.py RANK PORT (one rank).
"""

import os
import signal
import socket
import subprocess
import sys


def launch() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = [subprocess.Popen([sys.executable, __file__, str(rank), str(port)]) for rank in (0, 1)]
    failed = 0
    while not failed and any(r.poll() is None for r in ranks):
        pid, status = os.wait()
        code = os.waitstatus_to_exitcode(status)
        for r in ranks:
            if r.pid == pid:
                r.returncode = code
        failed = code
    for r in ranks:
        if r.poll() is None:
            r.send_signal(signal.SIGTERM)
            r.wait()
    return 128 - failed if failed < 0 else failed


def rank(index: int, port: int) -> None:
    if index == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"
        )
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=index
    )
    x = jnp.ones(4)
    if index == 1:
        noisy = jax.jit(lambda x: x + jax.random.normal(jax.random.key(0), x.shape))
        print(noisy(x))
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("done")
    print(f"rank {index} done")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        rank(int(sys.argv[1]), int(sys.argv[2]))
    else:
        sys.exit(launch())
