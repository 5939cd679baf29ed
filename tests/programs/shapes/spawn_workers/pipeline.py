"""A pipeline parent that never imports jax: `python pipeline.py`.

It runs three jobs (jobs.py) in worker processes started with multiprocessing's *spawn*
method, all at once, and asks XLA to run unoptimised in them (`XLA_FLAGS` gets
`--xla_disable_all_hlo_passes=true`, the "bit-exact debug mode" of the pipeline) by setting
the environment the workers inherit.

What XLA does wrong: in the `augment` worker, XLA's CPU backend aborts while emitting the
constants of a random-number computation (jax.random.normal in jit(augment_batch)):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

The `fit` and `score` workers compile their own functions under the same flag and finish.
The parent sees the worker's exit code -6 and exits 1 with its own message:
`pipeline: job augment died with exit code -6; 2 of 3 jobs finished`.

Bare run: exit status 1; the augment worker dies on SIGABRT (-6).
Expected answer: compile crash, in the augment worker's process; culprit jit(augment_batch)
(module jit_augment_batch); the replay reproduces the crash.
"""

import multiprocessing
import os
import sys

import jobs

JOBS = ("fit", "augment", "score")


def main() -> int:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"
    spawn = multiprocessing.get_context("spawn")
    workers = {name: spawn.Process(target=jobs.run, args=(name,), name=name) for name in JOBS}
    for worker in workers.values():
        worker.start()
    for worker in workers.values():
        worker.join()

    failed = {name: w.exitcode for name, w in workers.items() if w.exitcode != 0}
    for name, code in failed.items():
        print(
            f"pipeline: job {name} died with exit code {code}; "
            f"{len(JOBS) - len(failed)} of {len(JOBS)} jobs finished",
            file=sys.stderr,
        )
    if failed:
        return 1
    print("pipeline: all jobs finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
