"""repro.py reads the bundled snapshot's arguments itself, without proto classes: every
element type, layout and wire form it may meet must come out as xla_bugkit's own reader
gives it, bit for bit; a snapshot it cannot read stops it with a message, not a traceback."""

from __future__ import annotations

import gzip
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.literals import sample
from xla_bugkit.bundle import members, repro
from xla_bugkit.choose.dumps import Role
from xla_bugkit.failure.classify import Kind
from xla_bugkit.hlo import hlo_proto, literal
from xla_bugkit.hlo.literal import all_dtypes

pytestmark = pytest.mark.jax  # the rendered script imports jax

P = hlo_proto.PrimitiveType


def arrays() -> list[tuple[np.ndarray, list[int] | None]]:
    """Arguments worth reading back: (array, minor_to_major), None for row-major."""
    found: list[tuple[np.ndarray, list[int] | None]] = [(sample(p), None) for p in all_dtypes()]
    rng = np.random.default_rng(5)
    found.append((rng.standard_normal((3, 5)).astype(np.float32), [0, 1]))  # column-major
    found.append((rng.integers(-(2**40), 2**40, (2, 3, 4)), [1, 2, 0]))
    found.append((np.array(-7, np.int32), None))  # a scalar
    found.append((np.zeros((0, 3), np.float64), None))  # empty
    return found


def render(tmp_path: Path, snapshot: bytes, name: str = "m.snapshot.1.pb") -> dict[str, Any]:
    """repro.py written for a bundle holding ``snapshot``, loaded as a module."""
    (tmp_path / name).write_bytes(snapshot)
    files = {Role.BEFORE_PROTO.value: "m.hlo.pb", Role.SNAPSHOT.value: name}
    target = repro.Target("m", files, "cpu", None, None)
    written = repro.write(tmp_path, target, saw="", kind=Kind.RUNTIME_ERROR)
    assert written is not None and written.recorded_inputs
    return runpy.run_path(str(tmp_path / members.REPRO), run_name="repro")


def module() -> bytes:
    hlo = hlo_proto.HloProto()
    hlo.hlo_module.name = "m"
    return hlo.SerializeToString()


@pytest.mark.parametrize("compressed", [False, True])
def test_every_type_and_layout_reads_back_bit_for_bit(tmp_path: Path, compressed: bool) -> None:
    cases = arrays()
    lits = [literal.numpy_to_literal(a, minor_to_major=m) for a, m in cases]
    data = hlo_proto.make_snapshot(module(), lits)
    name = "m.snapshot.1.pb.gz" if compressed else "m.snapshot.1.pb"
    script = render(tmp_path, gzip.compress(data) if compressed else data, name)
    got = script["recorded"](script["SNAPSHOT"])
    ours = [literal.literal_to_numpy(a) for a in hlo_proto.read_snapshot(tmp_path / name).arguments]
    assert len(got) == len(cases)
    for g, o, (want, _) in zip(got, ours, cases, strict=True):
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.tobytes() == np.ascontiguousarray(want).tobytes() == o.tobytes()


def test_only_the_types_the_snapshot_holds_are_spelled_out(tmp_path: Path) -> None:
    lits = [literal.numpy_to_literal(np.arange(4, dtype=np.int32))]
    script = render(tmp_path, hlo_proto.make_snapshot(module(), lits))
    assert script["ENCODINGS"] == {int(P.S32): literal.wire_form(P.S32)}


def test_a_cut_snapshot_stops_with_a_message(tmp_path: Path) -> None:
    lits = [literal.numpy_to_literal(np.arange(1000, dtype=np.int64) * 10**12)]
    whole = hlo_proto.make_snapshot(module(), lits)
    script = render(tmp_path, whole)
    cut = tmp_path / "cut.snapshot.pb"
    cut.write_bytes(whole[:-3])
    with pytest.raises(SystemExit) as stopped:
        script["recorded"](cut)
    assert str(stopped.value).startswith("cut.snapshot.pb: cannot read its arguments (")
    assert "xla-bugkit verify replays it" in str(stopped.value)


def test_a_tuple_argument_leaves_repro_on_other_inputs(tmp_path: Path) -> None:
    lits = [literal.numpy_to_literal((np.zeros(2, np.float32), np.ones(3, np.int32)))]
    (tmp_path / "m.snapshot.1.pb").write_bytes(hlo_proto.make_snapshot(module(), lits))
    files = {Role.BEFORE_PROTO.value: "m.hlo.pb", Role.SNAPSHOT.value: "m.snapshot.1.pb"}
    written = repro.write(
        tmp_path, repro.Target("m", files, "cpu", None, None), saw="", kind=Kind.CRASH
    )
    assert written is not None and not written.recorded_inputs
    assert any("the module takes a tuple argument" in n for n in written.notes)
    assert "SNAPSHOT = None" in (tmp_path / members.REPRO).read_text()


def test_an_argument_without_a_shape_stops_with_a_message(tmp_path: Path) -> None:
    lits = [literal.numpy_to_literal(np.arange(4, dtype=np.int32))]
    script = render(tmp_path, hlo_proto.make_snapshot(module(), lits))
    shapeless = tmp_path / "shapeless.snapshot.pb"
    # An HloSnapshot whose one argument is an empty LiteralProto (field 2, length 0).
    shapeless.write_bytes(hlo_proto.make_snapshot(module(), []) + b"\x12\x00")
    with pytest.raises(SystemExit) as stopped:
        script["recorded"](shapeless)
    assert str(stopped.value).startswith("shapeless.snapshot.pb: cannot read its arguments (")
