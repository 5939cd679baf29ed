"""A risk audit that takes its XLA dump folder from its own config file, then finds a wrong result.

`python risk_audit.py` audits the factor risk of 20000 portfolios in float64. It reads
`audit_config.json` (next to this file) before importing jax. The config's `xla_debug`
section asks for XLA's dumps of every module, as text, in a folder of the audit's own,
`xla_dumps/risk_audit`, a path relative to the config file, which the program makes
absolute. The program empties that folder (each audit keeps only its own dumps) and appends

    --xla_dump_to=<this folder>/xla_dumps/risk_audit --xla_dump_hlo_as_text
    --xla_dump_hlo_module_re=.*

to XLA_FLAGS, so the auditors can read the HLO of every jitted function afterwards. It then
computes each portfolio's factor risk, `vmap(lambda x: sum((L @ x) ** 2))` under jit with L
the Cholesky factor of the 3-factor covariance, and checks every value against numpy with
the config's tolerance (rtol 1e-9). A failed check prints `AUDIT FAILED: ...` and exits
through `sys.exit(message)`.

What XLA does wrong (jax#39103, https://github.com/jax-ml/jax/issues/39103, the bug of
tests/programs/ynn_regression_wrong.py): jaxlib 0.10.2's CPU backend fuses the per-row
matrix-vector product, square and sum into one YNNPACK fusion that writes other rows'
values from element 16384 on, the first one past 128 KiB of the float64 output: thousands
of the 20000 risks are wrong (the first is portfolio 16384); the first 16384 match numpy.
XLA raises nothing. jaxlib 0.10.1 computes them all correctly.

The dump folder is the user's: after the bare run it holds the dumps of the program's own
two modules (jit_exposures and jit_factor_risk) and nothing else: on jaxlib 0.10.2 CPU 20
files, about 120 KB, the same names and contents every run. A tool must leave the folder as
the bare run leaves it, and take its own dumps elsewhere.

Bare run: exit status 1 (sys.exit with the AUDIT FAILED message).
Expected answer: wrong result; culprit jit(factor_risk) (module jit_factor_risk); the replay
reproduces the wrong result.
"""

import json
import os
import shutil
import sys
from pathlib import Path

CONFIG = json.loads((Path(__file__).resolve().parent / "audit_config.json").read_text())


def xla_debug_flags(section: dict, base: Path) -> list[str]:
    dump_to = (base / section["dump_to"]).resolve()
    shutil.rmtree(dump_to, ignore_errors=True)
    dump_to.mkdir(parents=True)
    flags = [f"--xla_dump_to={dump_to}"]
    if section.get("dump_hlo_as_text"):
        flags.append("--xla_dump_hlo_as_text")
    if section.get("dump_hlo_module_re"):
        flags.append(f"--xla_dump_hlo_module_re={section['dump_hlo_module_re']}")
    return flags


if CONFIG.get("xla_debug"):
    flags = xla_debug_flags(CONFIG["xla_debug"], Path(__file__).resolve().parent)
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts its backend)

jax.config.update("jax_enable_x64", CONFIG["x64"])

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

COVARIANCE = np.array(
    [[0.040, 0.012, 0.006], [0.012, 0.025, 0.004], [0.006, 0.004, 0.016]],
)


@jax.jit
def exposures(weights, loadings):
    return weights @ loadings


@jax.jit
def factor_risk(chol, exposure):
    return jax.vmap(lambda x: jnp.sum((chol @ x) ** 2))(exposure)


def main() -> None:
    rng = np.random.default_rng(11)
    n = CONFIG["portfolios"]
    weights = rng.dirichlet(np.ones(8), size=n)
    loadings = rng.standard_normal((8, 3))
    chol = np.linalg.cholesky(COVARIANCE).T
    exposure = np.asarray(exposures(weights, loadings))
    print(f"exposures: {exposure.shape[0]} portfolios, mean |beta| {np.abs(exposure).mean():.4f}")
    risk = np.asarray(factor_risk(chol, exposure))
    print(f"risk: mean variance {risk.mean():.6f}, max {risk.max():.6f}", flush=True)

    reference = ((exposure @ chol.T) ** 2).sum(axis=1)
    tol = CONFIG["tolerance"]
    bad = np.flatnonzero(~np.isclose(risk, reference, rtol=tol["rtol"], atol=tol["atol"]))
    if bad.size:
        k = int(bad[0])
        sys.exit(
            f"AUDIT FAILED: {bad.size} of {n} portfolio risks differ from numpy "
            f"(portfolio {k}: jit {risk[k]:.10g}, numpy {reference[k]:.10g})"
        )
    print(f"audit passed: {n} portfolios")


if __name__ == "__main__":
    main()
