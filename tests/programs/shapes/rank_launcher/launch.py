"""A torchrun-like launcher: `python launch.py --nproc 2 worker.py [ARGS...]`.

Starts one `python worker.py` per rank with RANK / WORLD_SIZE / LOCAL_RANK set, merges each
rank's stdout and stderr, and prints every line with a `[rankN] ` prefix, as torchrun's
`--tee`/log-prefix options do. When a rank fails it says which, and exits 1 once every rank
has ended. See worker.py for what fails inside XLA.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading


def relay(rank: int, stream) -> None:
    for line in stream:
        sys.stdout.write(f"[rank{rank}] {line}")
        sys.stdout.flush()


def describe(code: int) -> str:
    if code < 0:
        return f"exit code {code} ({signal.Signals(-code).name})"
    return f"exit code {code}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()

    ranks, relays = [], []
    for rank in range(opts.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(opts.nproc))
        child = subprocess.Popen(
            [sys.executable, opts.script, *opts.args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        thread = threading.Thread(target=relay, args=(rank, child.stdout))
        thread.start()
        ranks.append(child)
        relays.append(thread)

    codes = [child.wait() for child in ranks]
    for thread in relays:
        thread.join()
    failed = [(rank, code) for rank, code in enumerate(codes) if code != 0]
    for rank, code in failed:
        print(f"launch.py: rank {rank} failed with {describe(code)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
