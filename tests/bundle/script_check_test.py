"""``script_check``: a bundle's repro.py is vouched for only as xla-bugkit writes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_bugkit import __version__
from xla_bugkit.bundle import members, repro, script_check
from xla_bugkit.choose.dumps import Role
from xla_bugkit.failure.classify import Kind
from xla_bugkit.hlo import hlo_proto, literal


@pytest.fixture
def script(tmp_path: Path) -> str:
    """repro.py as this version writes it, for a module with a recorded snapshot."""
    hlo = hlo_proto.HloProto()
    hlo.hlo_module.name = "m"
    arguments = [literal.numpy_to_literal(np.arange(3, dtype=np.float32))]
    (tmp_path / "m.snapshot.1.pb").write_bytes(
        hlo_proto.make_snapshot(hlo.SerializeToString(), arguments)
    )
    files = {Role.BEFORE_PROTO.value: "modules/m/m.hlo.pb", Role.SNAPSHOT.value: "m.snapshot.1.pb"}
    target = repro.Target("module_0001.jit_m", files, "cpu", None, None)
    assert repro.write(tmp_path, target, saw="crash: x", kind=Kind.CRASH) is not None
    return (tmp_path / members.REPRO).read_text()


def test_the_script_as_written_is_vouched_for(script: str) -> None:
    assert script_check.check(script) is None


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("import faulthandler\n", "import faulthandler\nimport shutil\n", "it was edited"),
        ("PLATFORM = 'cpu'", "PLATFORM = __import__('os').getcwd()", "PLATFORM setting is not a"),
        ("PLATFORM = 'cpu'", "PLATFORM = 'cpu; rm'", "PLATFORM setting is not one"),
        ("HANG_SECONDS = 60", "HANG_SECONDS = True", "HANG_SECONDS setting is not one"),
        ("MODULE = HERE / 'modules", "MODULE = HERE / '/etc", "MODULE setting is not one"),
        ("SNAPSHOT = HERE / 'm.", "SNAPSHOT = HERE / '../m.", "SNAPSHOT is not a file inside"),
        ("FLAGS = []", "FLAGS = ['--xla_gpu_per_fusion_autotune_cache_dir=/x']", "would apply"),
        ("jit_m before its", "jit_m\nimport os\n# before its", "it was edited"),
    ],
)
def test_an_edit_is_named(script: str, old: str, new: str, said: str) -> None:
    assert old in script
    why = script_check.check(script.replace(old, new, 1))
    assert why is not None and said in why, why


def test_another_versions_script_is_not_checked(script: str) -> None:
    other = script.replace(f"Written by xla-bugkit {__version__}.", "Written by xla-bugkit 0.0.1.")
    assert (
        script_check.check(other)
        == f"written by xla-bugkit 0.0.1, not this {__version__}: not checked"
    )
