"""A GPU module replays with the run's autotune results, under the reporter's jaxlib only."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from xla_bugkit.choose.dumps import Role
from xla_bugkit.jaxlib_adapter import jaxlib_version
from xla_bugkit.replay.context import RunContext
from xla_bugkit.replay.inputs import Release, replay_input
from xla_bugkit.replay.spawn import AUTOTUNE_FLAG, split_flags


def _files(folder: Path) -> dict[str, Path]:
    files = {
        Role.BEFORE_PROTO.value: folder / "m.before_optimizations.hlo.pb",
        Role.AUTOTUNE.value: folder / "m.autotune_results.pbtxt",
        Role.DEBUG_OPTIONS.value: folder / "m.debug_options",
    }
    for path in files.values():
        path.write_text("")
    files[Role.DEBUG_OPTIONS.value].write_text("xla_gpu_autotune_level: 4\n")
    return files


def test_a_gpu_replay_loads_the_runs_autotune_results(tmp_path: Path) -> None:
    inp = replay_input("jit_step", _files(tmp_path), "sm_9.0_gpu")
    assert inp is not None and inp.platform == "gpu"
    env_flags, compile_flags = split_flags(inp)
    wanted = f"{AUTOTUNE_FLAG}={(tmp_path / 'm.autotune_results.pbtxt').absolute()}"
    assert compile_flags[-1] == wanted and wanted not in env_flags
    assert "--xla_gpu_autotune_level=4" in compile_flags  # the recorded ones stay


def test_another_release_or_platform_autotunes_afresh(tmp_path: Path) -> None:
    files = _files(tmp_path)
    gpu = replay_input("jit_step", files, "sm_9.0_gpu")
    assert gpu is not None
    older = replace(gpu, release=Release("0.9.2", tmp_path))
    cpu = replay_input("jit_step", files, "cpu")
    assert cpu is not None and cpu.autotune is None
    on_cpu = replace(gpu, platform="cpu")  # a GPU bundle's module run on the CPU
    for inp in (older, cpu, on_cpu):
        assert not any(f.startswith(AUTOTUNE_FLAG) for f in itertools.chain(*split_flags(inp)))


def test_a_bundles_own_autotune_path_flag_is_not_taken(tmp_path: Path) -> None:
    files = _files(tmp_path)
    files[Role.DEBUG_OPTIONS.value].write_text(
        'xla_gpu_load_autotune_results_from: "/home/someone/results.pbtxt"\n'
    )
    inp = replay_input("jit_step", files, "sm_9.0_gpu")
    assert inp is not None
    taken = [f for f in itertools.chain(*split_flags(inp)) if f.startswith(AUTOTUNE_FLAG)]
    assert taken == [f"{AUTOTUNE_FLAG}={(tmp_path / 'm.autotune_results.pbtxt').absolute()}"]


def test_a_bundle_of_another_jaxlib_autotunes_afresh(tmp_path: Path) -> None:
    """Autotune results carry their XLA's format version: another XLA may refuse them."""
    inp = replay_input("jit_step", _files(tmp_path), "sm_9.0_gpu")
    assert inp is not None
    manifest = {"xla_flags": [], "versions": {"jaxlib": jaxlib_version()}}
    assert RunContext.of_manifest(manifest).input(inp).autotune == inp.autotune
    manifest["versions"] = {"jaxlib": "0.4.38"}
    assert RunContext.of_manifest(manifest).input(inp).autotune is None
