"""A module this jaxlib cannot read as a proto replays from its metadata-free text.

Releases before 0.6 reject a recent ``.hlo.pb`` ("Instruction with id > INT_MAX") and cannot
parse a recent ``pjrt/module.mlir``; ``verify --jaxlib`` and ``bisect`` give the replay child
the module as metadata-free text too (``bisect.carrier``). Here the installed jaxlib is given
a proto it cannot load (its entry computation is missing) beside the real module's text and
an MLIR file it cannot parse: it must replay the text, say so, and leave the MLIR alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xla_bugkit.bisect import carrier
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.replay import protocol
from xla_bugkit.replay.inputs import ReplayInput

pytestmark = pytest.mark.jax  # a replay child, and jax here to lower the module


def _module(tmp_path: Path) -> tuple[Path, Path]:
    """The module as a proto this jaxlib cannot load, and as its metadata-free text."""
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(lambda x: jnp.sin(x) * 2.0).lower(jnp.ones(4, jnp.float32))
    module = hlo_proto.HloModuleProto()
    module.ParseFromString(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    good = tmp_path / "good.hlo.pb"
    good.write_bytes(hlo_proto.HloProto(hlo_module=module).SerializeToString())
    said: list[str] = []
    with carrier.with_text(ReplayInput("jit_f", good), said.append) as inp:
        assert said == [] and inp.hlo_text is not None
        text = inp.hlo_text.read_text()
    assert not inp.hlo_text.exists()  # the folder lasts as long as the block
    assert "metadata" not in text  # printed without it
    short = tmp_path / "short.txt"
    short.write_text(text)
    module.entry_computation_id = 987654  # RET_CHECK entry != nullptr when loaded
    unreadable = tmp_path / "unreadable.hlo.pb"
    unreadable.write_bytes(hlo_proto.HloProto(hlo_module=module).SerializeToString())
    return unreadable, short


def _worker(tmp_path: Path, **given: str | None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The replay worker run on a spec with the paths ``given``, and its output folder."""
    out = tmp_path / "out"
    out.mkdir()
    spec = {
        "extreme": None, "snapshot": None, "mlir": None, "compile_options": None,
        "flags_given": False, "platform": "cpu", "use_data": True, "seed": 7, "out": str(out),
        "reference": False, "flags": [], "conservative": [], **given,
    }  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "xla_bugkit.replay.child.worker", str(spec_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return done, out


def test_a_proto_this_jaxlib_cannot_read_replays_from_the_text(tmp_path: Path) -> None:
    unreadable, text = _module(tmp_path)
    mlir = tmp_path / "module.mlir"
    mlir.write_text("module @newer { this is not MLIR an older parser reads }\n")
    done, out = _worker(tmp_path, hlo=str(unreadable), hlo_text=str(text), mlir=str(mlir))
    assert done.returncode == 0, done.stdout + done.stderr
    withheld = protocol.markers(done.stdout, protocol.WITHHELD)
    assert len(withheld) == 1
    assert withheld[0].startswith(
        "the run's StableHLO (pjrt/module.mlir) and the module's metadata: "
        "replayed from its metadata-free text, this jaxlib cannot read the proto ("
    )
    assert "entry != nullptr" in withheld[0]  # the end of jaxlib's own error
    (result,) = protocol.load_arrays(protocol.arrays_path(out, protocol.TEST))
    x = np.ones(4, np.float32)  # the generated inputs are not ones: compare the shape
    assert result.shape == x.shape and result.dtype == x.dtype


def test_without_the_text_the_proto_error_stands(tmp_path: Path) -> None:
    unreadable, _ = _module(tmp_path)
    done, _ = _worker(tmp_path, hlo=str(unreadable))
    assert done.returncode == protocol.EXIT_NOT_REPLAYABLE, done.stdout + done.stderr
    said = protocol.marker(done.stdout, protocol.NOT_REPLAYABLE)
    assert said is not None and "cannot load the HLO" in said
