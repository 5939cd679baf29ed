"""The platforms registry: every row complete, names and aliases that resolve to one row each,
and the places that ask it (``replay --platform``, the replay child's environment, the
trackers' label, what verify says without the platform)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from xla_bugkit import platforms
from xla_bugkit.bundle import trackers
from xla_bugkit.choose import mosaic
from xla_bugkit.cli.commands import replay as replay_command
from xla_bugkit.hlo import flags
from xla_bugkit.replay import children, elsewhere, limits
from xla_bugkit.replay.child import replayable

ROWS = pytest.mark.parametrize("row", platforms.PLATFORMS, ids=lambda p: p.name)


@ROWS
def test_every_field_of_a_row_is_filled(row: platforms.Platform) -> None:
    # A field a platform has none of says so (None, (), False); a name or a label never is
    # left empty.
    for field in ("name", "label", "device", "needs", "jax_platforms", "pjrt_device"):
        assert getattr(row, field), field
    assert row.jax_platforms.split(",")[0] == row.name
    assert all(dist in row.plugins for dist, _ in row.extras)
    assert (row.compiler_env is None) == (row.compiler_dist is None)
    assert (row.compiler_library_env is None) == (row.compiler_dist is None)
    assert (row.cpu_reference) == ("cpu" in row.jax_platforms.split(",")[1:])


def test_no_field_has_a_default() -> None:
    # A new row must say every field: one left out is an error, not a silent default.
    fields = dataclasses.fields(platforms.Platform)
    assert all(f.default is dataclasses.MISSING for f in fields)
    assert all(f.default_factory is dataclasses.MISSING for f in fields)


def test_names_and_aliases_resolve_to_one_row_each() -> None:
    names = [n for p in platforms.PLATFORMS for n in (p.name, *p.aliases)]
    assert len(names) == len(set(names))
    for p in platforms.PLATFORMS:
        assert all(platforms.find(n) is p for n in (p.name, *p.aliases))
    assert platforms.find("cuda") is platforms.GPU
    assert platforms.find("interpreter") is None


def test_replay_takes_its_platform_choices_from_the_registry() -> None:
    parser = argparse.ArgumentParser()
    replay_command.add_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "platform"]
    assert tuple(action.choices or ()) == platforms.NAMES == ("cpu", "gpu", "tpu")


@ROWS
def test_the_replay_child_starts_the_rows_platforms(row: platforms.Platform) -> None:
    env = children.child_env((), row.name, tpu_args=("--xla_tpu_flag=1",))
    assert env["JAX_PLATFORMS"] == row.jax_platforms
    # Only the platform whose compiler reads its own variable is handed the run's flags.
    handed = env.get(flags.TPU_ENV) == "--xla_tpu_flag=1"
    assert handed == (row.compiler_env == flags.TPU_ENV)


def test_memory_caps_and_labels() -> None:
    assert [p.name for p in platforms.PLATFORMS if limits.memory_limit(p.name) is not None] == [
        "cpu"
    ]
    labels = {name: trackers._backend(name) for name in ("cpu", "gpu", "cuda", "sm_9.0_gpu")}
    assert labels == {"cpu": "CPU", "gpu": "CUDA", "cuda": "CUDA", "sm_9.0_gpu": "CUDA"}
    assert trackers._backend("tpu") == "TPU"
    assert trackers._backend("interpreter") == "INTERPRETER"


def test_the_tpu_compiler_lowers_pallas_kernels() -> None:
    assert platforms.TPU.compiler_targets == {mosaic.KERNEL_TARGET.decode()}
    assert replayable.lowered("tpu") == platforms.TPU.compiler_targets
    assert replayable.lowered("cpu") == replayable.lowered("interpreter") == frozenset()


@pytest.mark.parametrize(
    ("platform", "versions", "extra"),
    [
        ("gpu", {}, "cuda12"),
        ("gpu", {"jax-cuda12-plugin": "0.7.0"}, "cuda12"),
        ("gpu", {"jax-cuda13-plugin": "0.7.0"}, "cuda13"),
        ("gpu", {"jax-cuda12-plugin": "0.7.0", "jax-cuda13-plugin": "0.7.0"}, "cuda13"),
        ("tpu", {}, "tpu"),
        ("cpu", {}, ""),
    ],
)
def test_the_pip_extra_is_the_one_the_bundle_recorded(
    platform: str, versions: dict[str, str], extra: str
) -> None:
    row = platforms.find(platform)
    assert row is not None
    assert platforms.extra(row, frozenset(versions)) == extra


def test_what_verify_says_without_the_platform() -> None:
    rocm = {"jax": "0.7.0", "jax-rocm7-plugin": "0.7.0"}
    assert elsewhere.needs("tpu", {}) == "a TPU"
    assert elsewhere.needs("gpu", {}) == "CUDA"
    assert elsewhere.needs("gpu", rocm) == "ROCm"
    assert elsewhere.command("b.7z", "tpu", {"jax": "0.7.0"}, "pip install xla-bugkit") == (
        "pip install 'jax[tpu]==0.7.0' && pip install xla-bugkit && xla-bugkit verify b.7z"
    )
    assert elsewhere.command("b.7z", "gpu", rocm, "pip install xla-bugkit") == (
        "with jax==0.7.0 and its ROCm plugin installed: pip install xla-bugkit && "
        "xla-bugkit verify b.7z"
    )
    assert not elsewhere.absent_here("cpu")
    assert elsewhere.absent_here("interpreter")


def _pci(root: Path, slot: str, vendor: str, device: str) -> None:
    (root / slot).mkdir(parents=True)
    (root / slot / "vendor").write_text(vendor + "\n")
    (root / slot / "device").write_text(device + "\n")


def test_a_tpu_is_told_by_its_chips_on_the_pci_bus(tmp_path: Path) -> None:
    # As sysfs showed them on a TPU v5e machine (four functions of Google's vendor id,
    # device 0x0063), and as a machine with Google's virtual NIC alone shows it.
    v5e, nic_only = tmp_path / "v5e", tmp_path / "nic"
    for slot in ("0000:00:08.0", "0000:00:09.0"):
        _pci(v5e, slot, "0x1ae0", "0x0063")
    _pci(v5e, "0000:00:04.0", "0x1af4", "0x1000")
    _pci(nic_only, "0000:00:04.0", "0x1ae0", "0x0042")
    assert platforms.devices_here(platforms.TPU, v5e) is True
    assert platforms.devices_here(platforms.TPU, nic_only) is False
    assert platforms.devices_here(platforms.TPU, tmp_path / "no-sysfs") is False
    assert platforms.devices_here(platforms.GPU, v5e) is None  # its row does not tell so
