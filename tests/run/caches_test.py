"""The program's own caches under collect: JAX's persistent compilation cache and XLA's cache
flags are neither read nor written for the run, and the run says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, clean_env, run_collect
from xla_bugkit.hlo import flags
from xla_bugkit.run.hook import caches

PROGRAM = PROGRAMS / "own_compilation_cache.py"


def test_the_hooks_cache_flags_are_those_collect_leaves_out() -> None:
    # The hook imports nothing of xla-bugkit's: it keeps its own copy of the names.
    assert {f"--{name}" for name in caches.CACHE_FLAGS} == set(flags.CACHE_FLAGS)


@pytest.mark.parametrize(
    ("value", "kept", "dropped"),
    [
        (
            "--xla_disable_all_hlo_passes=true --xla_gpu_kernel_cache_file=/c/kernels",
            "--xla_disable_all_hlo_passes=true",
            ["--xla_gpu_kernel_cache_file=/c/kernels"],
        ),
        (  # one dash, as XLA also reads; a quoted folder with a space in it
            "-xla_gpu_per_fusion_autotune_cache_dir='/my cache' --xla_cpu_enable_fast_math=false",
            "--xla_cpu_enable_fast_math=false",
            ["-xla_gpu_per_fusion_autotune_cache_dir='/my cache'"],
        ),
        (
            "--xla_gpu_per_fusion_autotune_cache_dir=/a "
            "--xla_gpu_experimental_autotune_cache_mode=UPDATE --xla_dump_to=/w",
            "--xla_dump_to=/w",
            [
                "--xla_gpu_per_fusion_autotune_cache_dir=/a",
                "--xla_gpu_experimental_autotune_cache_mode=UPDATE",
            ],
        ),
        (  # a flag whose name only starts like one of them is not one
            "--xla_gpu_kernel_cache_file_x=1 --xla_gpu_kernel_cache_filename=2",
            "--xla_gpu_kernel_cache_file_x=1 --xla_gpu_kernel_cache_filename=2",
            [],
        ),
    ],
)
def test_xlas_cache_flags_are_taken_out_of_xla_flags(
    value: str, kept: str, dropped: list[str]
) -> None:
    left, found = caches.without_cache_flags(value)
    assert found == dropped
    assert flags.split(left) == flags.split(kept)


def test_a_cache_flag_in_the_users_xla_flags_is_left_out_of_the_run_and_said() -> None:
    merged = flags.merge(
        "--xla_gpu_per_fusion_autotune_cache_dir=/home/u/autotune --xla_cpu_enable_fast_math=false",
        Path("/work/dumps"),
    )
    assert "--xla_cpu_enable_fast_math=false" in merged.flags
    assert not any(f.startswith("--xla_gpu_per_fusion_autotune_cache_dir") for f in merged.flags)
    assert merged.notes == (
        "--xla_gpu_per_fusion_autotune_cache_dir=/home/u/autotune is left out of the run's "
        "XLA_FLAGS: XLA neither read nor wrote that cache (your files are as they were)",
    )


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time (ns)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.slow
@pytest.mark.jax
def test_a_programs_own_caches_are_neither_read_nor_written(tmp_path: Path) -> None:
    cache = tmp_path / "my-cache"
    cache.mkdir()
    # Bare, the program fills its cache with the modules it compiled before its crash.
    bare = subprocess.run(
        [sys.executable, str(PROGRAM), str(cache)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT,
    )
    assert bare.returncode < 0, bare.stderr[-2000:]  # SIGABRT, in XLA's compiler
    before = _listing(cache)
    assert any(name.endswith("-cache") for name in before), before
    autotune = f"--xla_gpu_per_fusion_autotune_cache_dir={cache}/autotune"

    c = run_collect(
        tmp_path / "b.zip", [sys.executable, str(PROGRAM), str(cache)], xla_flags=autotune
    )

    assert c.returncode == 0, c.stderr
    assert _listing(cache) == before
    said = (
        f"the program's JAX compilation cache ({cache}) was neither read nor written for this "
        "run: a cached executable compiles nothing and so dumps nothing (your files are as "
        "they were)"
    )
    kernels = flags.cache_flag_note(f"--xla_gpu_kernel_cache_file={cache}/kernels")
    for note in (said, kernels, flags.cache_flag_note(autotune)):
        assert f"  {note}\n" in c.stderr
        assert note in c.manifest()["notes"]
    manifest = c.manifest()
    assert manifest["xla_flags"] == ["--xla_disable_all_hlo_passes=true"]
    assert "reproduced: crash" in c.stderr
