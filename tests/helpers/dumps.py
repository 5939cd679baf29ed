"""Small real jax programs run with dumps on, as collect would find them (``dump``), and
their modules as a replay takes them (``Dumped``)."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

from tests.helpers import programs
from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, classify
from xla_bugkit.replay.inputs import ReplayInput

DUMP_FLAGS = (
    "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots "
    "--xla_dump_large_constants"
)
FAST_MATH = (
    "--xla_cpu_enable_fast_math=true",
    "--xla_cpu_fast_math_honor_nans=false",
    "--xla_cpu_fast_math_honor_infs=false",
)

PROGRAM_FILES = programs.PROGRAMS  # run as they are

PROGRAMS = {
    "normal": """
        @jax.jit
        def f(x, y):
            def body(i, c):
                a, b = c
                return a * 0.5 + jnp.tanh(b), b + i
            a, b = jax.lax.fori_loop(0, 3, body, (x, jnp.float32(1.0)))
            return jnp.sin(a) @ y + jnp.sum(x), b
        x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        print(f(x, np.arange(8, dtype=np.float32).reshape(4, 2)))
    """,
    "crash": """
        print(jax.jit(lambda x: jax.random.normal(jax.random.key(0), (4,)) + x)(jnp.ones(4)))
    """,
    "split": "print(jax.jit(lambda x: x * 2)(np.ones(4, np.float32)))",
    "oom": """
        f = jax.jit(lambda x: jnp.broadcast_to(x, (1 << 20, 1 << 20)) * 2)
        print(f(np.float32(1)))
    """,
    "callback": """
        f = jax.jit(lambda x: jax.pure_callback(
            np.sin, jax.ShapeDtypeStruct((4,), jnp.float32), x) * 2)
        print(f(np.ones(4, np.float32)))
    """,
    "pmap": "print(jax.pmap(lambda x: x * 2)(np.ones((2, 3), np.float32)))",
    "sharded": """
        mesh = jax.make_mesh((2,), ("x",))
        x = jax.device_put(
            np.arange(8, dtype=np.float32).reshape(4, 2),
            jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")),
        )
        print(jax.jit(lambda x: jnp.sin(x) * 2 + x.sum())(x))
    """,
    "nan": """
        x = np.array([1.0, np.nan, -2.0, np.inf, np.nan, 3.0], np.float32)
        print(jax.jit(lambda x: jnp.where(jnp.isnan(x), 0.0, x))(x))
    """,
}


@dataclass(frozen=True)
class Dumped:
    dump: Path
    failure: Failure  # how the program ended, as collect would record it
    flags: tuple[str, ...]

    def module(self, name: str) -> ReplayInput:
        """The last module of that name, as collect would select it."""
        hlo = sorted(self.dump.glob(f"module_*.{name}.before_optimizations.hlo.pb"))[-1]
        return self._input(name, hlo)

    def first_module(self, name: str, parameter_type: str) -> ReplayInput:
        """The first module of that name whose entry parameters are all ``parameter_type``."""
        for hlo in sorted(self.dump.glob(f"module_*.{name}.before_optimizations.hlo.pb")):
            text = hlo.with_suffix("").with_suffix(".txt").read_text()
            layout = re.search(r"entry_computation_layout=\{\((.*?)\)->", text)
            types = re.findall(r"\b([a-z]+\d*)\[", layout.group(1)) if layout else []
            if types and set(types) == {parameter_type}:
                return self._input(name, hlo)
        raise AssertionError(f"no {name} module with {parameter_type} parameters in {self.dump}")

    def with_pjrt(self, name: str) -> ReplayInput:
        """The last module of that name with its PJRT folder (module.mlir, compile options)."""
        inp = self.module(name)
        folder = self.dump / inp.hlo.name.split(".before_optimizations")[0]
        return replace(
            inp, mlir=folder / "module.mlir", compile_options=folder / "compile_options.pb"
        )

    def _input(self, name: str, hlo: Path) -> ReplayInput:
        prefix = hlo.name.split(".before_optimizations")[0]
        snapshots = sorted(self.dump.glob(f"{prefix}.snapshot.*.pb"))
        return ReplayInput(name, hlo, snapshots[0] if snapshots else None, xla_flags=self.flags)


def dump(root: Path, program: str, flags: tuple[str, ...] = (), timeout: float = 60) -> Dumped:
    if program in PROGRAMS:
        script = root / f"{program}.py"
        body = textwrap.dedent(PROGRAMS[program])
        script.write_text(f"import jax, jax.numpy as jnp, numpy as np\n{body}\n")
    else:
        script = PROGRAM_FILES / f"{program}.py"
    dump = root / f"dump_{program}"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = " ".join((f"--xla_dump_to={dump}", DUMP_FLAGS, *flags))
    done = proc.run_captured([sys.executable, str(script)], env=env, timeout=timeout)
    failure = classify(done.output, exit_status=done.returncode, timed_out=done.timed_out)
    return Dumped(dump, failure, flags)
