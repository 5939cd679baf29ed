"""The environment for a test that needs an accelerator, or a skip (with the reason) where
jax sees none. Nothing is probed while tests are collected: only the test that asks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata

import pytest


def installed(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def accelerator_env(
    platform: str, plugins: Sequence[str], *, missing: str, name: str, timeout: float
) -> dict[str, str]:
    """The environment (JAX_PLATFORMS left out) in which jax has a ``platform`` device;
    skips where none of ``plugins`` is installed (saying ``missing``) or jax sees no such
    device (``name``: the device in words); fails where opening it takes over ``timeout``
    seconds."""
    if not any(installed(d) for d in plugins):
        pytest.skip(missing)
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    probe = f"import jax; print(jax.devices({platform!r})[0].platform)"
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=timeout, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"opening the {name} with jax took over {timeout:g} s")
    if done.returncode != 0 or done.stdout.strip() != platform:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"jax sees no {name} here: {last}")
    return env
