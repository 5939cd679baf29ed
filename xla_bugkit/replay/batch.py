"""Several modules replayed in one child: ``python -m xla_bugkit.replay.batch LIST.json``.

Importing jax in a replay child costs seconds (many more on a loaded machine), often more
than replaying a small module, and the differential search replays dozens of modules. This
child runs ``worker.main`` for each spec in turn, announcing each with a marker line, and
goes on after an error that XLA raised (printed with its traceback, as a one-module child's
would be). A crash or a hang ends the child: the parent replays that module in a child of
its own (``judge.replay``), which judges a crash with its real exit status.

The parent (``replay_batch``) cuts the child's output at the markers and judges each
module's part as ``judge.replay`` judges a child's whole output.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import flags
from xla_bugkit.replay import protocol
from xla_bugkit.replay.children import child_env
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge import judged
from xla_bugkit.replay.spawn import child_spec, split_flags
from xla_bugkit.verdict import Verdict

STARTS = protocol.STARTS  # the number of the spec that starts
ENDED = protocol.ENDED  # "NUMBER STATUS": the spec that ended, and how
# What a module's part of the output ends with when the child stopped on purpose: the
# parent must settle those in a child of their own (more devices, a flag in XLA_FLAGS).
_SETTLE = {protocol.EXIT_NEEDS_DEVICES, protocol.EXIT_REJECTED_FLAG}


def env_flags(inp: ReplayInput) -> tuple[str, ...]:
    """The flags a child must start with to replay ``inp``: one child, one such set."""
    return tuple(split_flags(inp)[0])


def replay_batch(
    inps: Sequence[ReplayInput],
    expected: Failure | None,
    *,
    timeout: float,
    memory_limit: int | None = None,
    keep_arrays: Sequence[Path | None] = (),
) -> list[Verdict | None]:
    """Replay ``inps`` (one platform and one ``env_flags``) in one child, in order.

    The result holds a verdict for each module the child finished, in order, up to the first
    it did not (a crash, a hang, the ``timeout`` for them all); None where the module must
    be replayed in a child of its own. ``keep_arrays``: per module, a folder to copy its
    arrays into.
    """
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-batch-") as tmp:
        outs = [Path(tmp) / str(i) for i in range(len(inps))]
        paths = []
        for inp, out in zip(inps, outs, strict=True):
            out.mkdir()
            spec = {**child_spec(inp, out), "flags": split_flags(inp)[1]}
            (out / protocol.SPEC).write_text(json.dumps(spec))
            paths.append(str(out / protocol.SPEC))
        (Path(tmp) / "batch.json").write_text(json.dumps(paths))
        # The batch runs under the first module's interpreter (the program's, or this one).
        python = inps[0].python or sys.executable
        argv = [python, "-m", "xla_bugkit.replay.batch", str(Path(tmp) / "batch.json")]
        limits = proc.Limits(memory_bytes=memory_limit) if memory_limit else None
        env = child_env(env_flags(inps[0]), inps[0].platform, inps[0].python)
        done = proc.run_captured(argv, env=env, timeout=timeout, limits=limits)
        verdicts: list[Verdict | None] = []
        for i, (text, status) in enumerate(_parts(done.output)):
            if status in _SETTLE or flags.unknown_flag(text) is not None:
                verdicts.append(None)
                continue
            part = proc.Completed(status, text, timed_out=False, duration=0.0)
            verdicts.append(judged(inps[i], part, outs[i], expected, timeout=timeout))
            keep = keep_arrays[i] if i < len(keep_arrays) else None
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for saved in outs[i].glob("*.npz"):
                    shutil.copyfile(saved, keep / saved.name)
        return verdicts


def _parts(output: str) -> list[tuple[str, int]]:
    """Each finished module's part of the output and its exit status, in order, up to the
    first that did not finish."""
    parts: list[tuple[str, int]] = []
    lines: list[str] = []
    for line in output.splitlines(keepends=True):
        if line.startswith(STARTS):
            lines = []
        elif line.startswith(ENDED):
            number, _, status = line[len(ENDED) :].strip().partition(" ")
            if int(number) != len(parts):
                break
            parts.append(("".join(lines), int(status)))
        else:
            lines.append(line)
    return parts


def _run_one(number: int, spec_path: str) -> None:
    from xla_bugkit.replay.child import worker

    protocol.say(STARTS, number)
    try:
        status = worker.main([spec_path])
    except Exception:
        # What a one-module child would die of (an XLA error status): its part of the
        # output then reads the same, and the next module still runs.
        traceback.print_exc(file=sys.stdout)
        status = 1
    sys.stdout.flush()
    protocol.say(ENDED, f"{number} {status}")


def main(argv: Sequence[str]) -> int:
    # One stream, in order: the parent cuts it at the markers, so a traceback (stderr) must
    # not land in the next module's part. XLA's own C++ logging writes to fd 2: point it here.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    os.dup2(sys.stdout.fileno(), sys.stderr.fileno())
    sys.stderr = sys.stdout
    for number, spec_path in enumerate(json.loads(Path(argv[0]).read_text())):
        _run_one(number, spec_path)
    return 0


if __name__ == "__main__":
    protocol.run_and_exit(lambda: main(sys.argv[1:]))
