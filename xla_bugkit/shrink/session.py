"""One shrink's probing: the budget, the inputs of each candidate, the reference values, and
the count of probes; every probe runs in a child (``probe``)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.hlo import flags
from xla_bugkit.hlo.generated import SEED, array_type, draw
from xla_bugkit.hlo.generated import generated as generated_inputs
from xla_bugkit.replay import protocol
from xla_bugkit.shrink import child
from xla_bugkit.shrink.hlo_text import Candidate, parameter_number
from xla_bugkit.shrink.oracle import Answer, Judged, Oracle
from xla_bugkit.shrink.probe import ForkServer, ProbeRun, run_fresh
from xla_bugkit.ui import Ui


class Exhausted(Exception):
    """The budget (wall time or probes) is spent; the best result so far stands."""


@dataclass
class Budget:
    seconds: float
    max_probes: int
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spent(self, probes: int) -> bool:
        return probes >= self.max_probes or self.elapsed() >= self.seconds


def _one(shape: str, rng: np.random.Generator) -> np.ndarray:
    return draw(*array_type(shape), rng)


def generated(shape: str, seed: int) -> np.ndarray:
    """Seeded inputs for a parameter of HLO ``shape`` (a cut whose value is not known)."""
    return _one(shape, np.random.default_rng(seed))


def replay_inputs(shapes: Sequence[str], seed: int = SEED) -> list[np.ndarray]:
    """The inputs the replay, ``verify`` and repro.py generate for parameters of these
    shapes (in parameter order) when a module has no recorded ones (``hlo.generated``)."""
    return generated_inputs([array_type(shape) for shape in shapes], seed)


@dataclass
class Session:
    """Probes against one oracle. ``values``: every entry value of the original module (the
    op-by-op reference), or None when it could not be computed (then cuts get seeded data).
    ``generated_only``: every candidate runs on the inputs the replay generates for it (the
    bundle has no recorded inputs, and the shrunk module must not pretend to have some)."""

    work: Path
    oracle: Oracle
    budget: Budget
    args: list[np.ndarray]
    xla_flags: tuple[str, ...]
    ui: Ui
    server: ForkServer | None = None
    platform: str = "cpu"
    timeout: float = 60.0
    values: dict[str, np.ndarray] | None = None
    probes: int = 0
    accepted: int = 0
    generated_only: bool = False

    def inputs(self, c: Candidate) -> list[np.ndarray]:
        shapes = {parameter_number(i): i.shape for i in c.entry if i.opcode == "parameter"}
        if self.generated_only:
            return replay_inputs([shapes[n] for n in range(len(shapes))])
        arrays: list[np.ndarray] = []
        for number, source in enumerate(c.sources):
            if source.index is not None:
                arrays.append(self.args[source.index])
            elif self.values is not None and source.value in self.values:
                arrays.append(self.values[source.value])
            else:
                arrays.append(generated(shapes[number], seed=SEED + number))
        return arrays

    def reference(self, c: Candidate) -> list[np.ndarray] | None:
        """The root's value in the original run (wrong results only)."""
        if self.values is None:
            return None
        root = c.root
        names = list(root.operands) if root.opcode == "tuple" else [root.name]
        found = [self.values.get(n) for n in names]
        return None if any(v is None for v in found) else [v for v in found if v is not None]

    def run(
        self,
        c: Candidate,
        *,
        xla_flags: Sequence[str] | None = None,
        overrides: Sequence[tuple[str, Any]] = (),
        task: str = "run",
        fresh_env: dict[str, str] | None = None,
    ) -> ProbeRun:
        if self.budget.spent(self.probes):
            raise Exhausted
        self.probes += 1
        folder = self.work / f"probe-{self.probes:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / child.TEXT).write_text(c.text(), "utf-8")
        protocol.save_arrays(folder / "args.npz", self.inputs(c))
        spec = {
            "task": task,
            "hlo": str(folder / child.TEXT),
            "args": str(folder / "args.npz"),
            "platform": self.platform,
            "overrides": [list(o) for o in overrides],
        }
        joined = flags.join(self.xla_flags if xla_flags is None else xla_flags)
        if self.server is None or fresh_env is not None:
            env = {**(fresh_env or {}), "JAX_PLATFORMS": self.platform}
            return run_fresh(folder, spec, xla_flags=joined, timeout=self.timeout, env=env)
        return self.server.run(folder, spec, xla_flags=joined, timeout=self.timeout)

    def check(
        self,
        c: Candidate,
        *,
        xla_flags: Sequence[str] | None = None,
        overrides: Sequence[tuple[str, Any]] = (),
    ) -> Judged:
        """Run ``c`` and judge it; raises ``Exhausted`` when the budget is spent."""
        if self.oracle.wrong_result and self.reference(c) is None:
            return Judged(Answer.OTHER)
        return self.check_run(c, self.run(c, xla_flags=xla_flags, overrides=overrides))

    def check_run(self, c: Candidate, run: ProbeRun) -> Judged:
        """Judge a probe of ``c`` that has run."""
        reference = self.reference(c) if self.oracle.wrong_result else None
        return self.oracle.judge(run, reference)

    def load_values(self, c: Candidate) -> dict[str, np.ndarray] | None:
        """Every entry value of ``c`` on its inputs, op by op (one probe), or None."""
        run = self.run(c, task=child.VALUES)
        path = protocol.arrays_path(run.folder, child.VALUES)
        if not path.exists():
            return None
        names = json.loads((run.folder / "values.json").read_text())
        return dict(zip(names, protocol.load_arrays(path), strict=True))

    def add_values(self, c: Candidate) -> None:
        """After an edit that keeps every value but adds entry instructions (an inlined
        call): their values join the table, so that cuts can take them."""
        if self.values is None:
            return
        found = self.load_values(c) or {}
        for name, value in found.items():
            self.values.setdefault(name, value)

    def progress(self, before: int, now: int) -> None:
        self.ui.say(f"probe {self.probes}, {before} → {now} instructions")
