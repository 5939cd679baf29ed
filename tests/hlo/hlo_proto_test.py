"""Tests for xla_bugkit.hlo.hlo_proto, including a real snapshot dumped by jax on CPU."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.helpers.programs import literal_to_array
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.hlo.hlo_proto import (
    HloModuleProto,
    HloProto,
    HloSnapshot,
    LiteralProto,
    PrimitiveType,
    module_bytes,
    read_hlo_proto,
    read_snapshot,
)
from xla_bugkit.hlo.literal import literal_to_numpy, numpy_to_literal

# Arguments built the same way in the child and here, so they can be compared bit for bit.
MAKE_ARGS = """
import ml_dtypes, numpy as np
ARGS = (
    np.linspace(-2, 2, 16, dtype=np.float32).reshape(4, 4),
    np.arange(6).astype(ml_dtypes.bfloat16).reshape(2, 3) / 4,
    np.array([-128, -1, 0, 5, 127], dtype=np.int8),
    np.array([-8, -1, 0, 3, 7], dtype=ml_dtypes.int4),
    np.int32(7),
)
"""

# The child saves each output as (dtype name, shape, hex bytes): np.save cannot hold bf16/int4.
CHILD = (
    MAKE_ARGS
    + """
import json, sys, jax, jax.numpy as jnp

@jax.jit
def step(a, b, c, d, s):
    d_plus_one = (d.astype(jnp.int8) + 1).astype(d.dtype)
    return a @ a + b.astype(jnp.float32).sum() * s, c * 2, d_plus_one

outs = [np.asarray(x) for x in step(*ARGS)]
with open(sys.argv[1], "w") as f:
    json.dump([[str(x.dtype), list(x.shape), x.tobytes().hex()] for x in outs], f)
"""
)


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real dump directory: one jitted function run once on CPU, with snapshots."""
    root = tmp_path_factory.mktemp("dump")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = f"--xla_dump_to={root} --xla_dump_hlo_as_proto --xla_dump_hlo_snapshots"
    subprocess.run(
        [sys.executable, "-c", CHILD, str(root / "result.json")],
        env=env,
        check=True,
        timeout=300,
    )
    return root


def only(paths: list[Path]) -> Path:
    assert len(paths) == 1, paths
    return paths[0]


def test_real_snapshot_arguments_and_result_decode_exactly(dump: Path) -> None:
    namespace: dict[str, object] = {}
    exec(MAKE_ARGS, namespace)
    args = namespace["ARGS"]
    assert isinstance(args, tuple)
    snapshot = read_snapshot(only(list(dump.glob("*jit_step.snapshot.*.pb"))))
    assert snapshot.hlo.hlo_module.name == "jit_step"
    assert len(snapshot.arguments) == len(args)
    for literal, want in zip(snapshot.arguments, args, strict=True):
        got = literal_to_array(literal)
        assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())
    outputs = [literal_to_array(element) for element in snapshot.result.tuple_literals]
    saved = json.loads((dump / "result.json").read_text())
    assert [[str(x.dtype), list(x.shape), x.tobytes().hex()] for x in outputs] == saved
    assert len(literal_to_numpy(snapshot.result)) == len(saved)


def test_real_literals_encode_as_xla_does(dump: Path) -> None:
    snapshot = read_snapshot(only(list(dump.glob("*jit_step.snapshot.*.pb"))))
    for literal in [*snapshot.arguments, snapshot.result]:
        # XLA's layouts carry fields we do not declare; everything else must match bytewise.
        known = LiteralProto()
        known.CopyFrom(literal)
        known.DiscardUnknownFields()
        again = numpy_to_literal(literal_to_numpy(literal))
        assert again.SerializeToString() == known.SerializeToString()


def test_real_files_reserialize_byte_for_byte(dump: Path) -> None:
    for path in [*dump.glob("*jit_step.snapshot.*.pb"), *dump.glob("*jit_step*.hlo.pb")]:
        message = HloSnapshot() if ".snapshot." in path.name else HloProto()
        message.ParseFromString(path.read_bytes())
        assert message.SerializeToString() == path.read_bytes(), path.name


def test_module_bytes_is_accepted_by_jaxlib(dump: Path) -> None:
    from jax._src.lib import _jax  # type: ignore[attr-defined]  # private, as replay uses it

    path = only(list(dump.glob("*jit_step.before_optimizations.hlo.pb")))
    hlo = read_hlo_proto(path)
    data = module_bytes(hlo)
    # HloProto field 1 (tag 0x0a) is the module: the payload follows a varint length.
    raw = path.read_bytes()
    assert raw[0] == 0x0A and data in raw
    assert HloModuleProto.FromString(data).entry_computation_name == (
        hlo.hlo_module.entry_computation_name
    )
    stablehlo = _jax.mlir.hlo_to_stablehlo(data)
    assert isinstance(stablehlo, bytes) and stablehlo


def test_gzipped_files_are_read(dump: Path, tmp_path: Path) -> None:
    source = only(list(dump.glob("*jit_step.before_optimizations.hlo.pb")))
    target = tmp_path / (source.name + ".gz")
    target.write_bytes(gzip.compress(source.read_bytes()))
    assert read_hlo_proto(target) == read_hlo_proto(source)


def test_snapshot_fields_use_xla_numbers() -> None:
    snapshot = HloSnapshot(execution_platform="Host")
    snapshot.hlo.hlo_module.name = "m"
    assert snapshot.SerializeToString() == b"\x0a\x05\x0a\x03\x0a\x01m\x22\x04Host"
    lit = LiteralProto()
    lit.shape.element_type = PrimitiveType.S4
    lit.s4s = b"\x0f"
    # shape(1){element_type(2)=21}, then s4s is field 21: tag (21 << 3) | 2 = 0xaa 0x01.
    assert lit.SerializeToString() == b"\x0a\x02\x10\x15\xaa\x01\x01\x0f"


def test_primitive_type_enum_matches_descriptor() -> None:
    enum = HloSnapshot.DESCRIPTOR.file.enum_types_by_name["PrimitiveType"]
    assert {v.name: v.number for v in enum.values} == {p.name: p.value for p in PrimitiveType}
    assert (PrimitiveType.F8E8M0FNU.value, PrimitiveType.TUPLE.value) == (33, 13)


def test_private_package_leaves_default_pool_alone() -> None:
    assert HloSnapshot.DESCRIPTOR.full_name == "xla_bugkit.xla.HloSnapshot"
    from google.protobuf import descriptor_pool

    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName("xla_bugkit.xla.HloSnapshot")


def test_unknown_fields_survive_a_round_trip() -> None:
    module = HloModuleProto(name="m", id=3)
    # Field 15 (is_dynamic, bool) is not declared here.
    data = module.SerializeToString() + b"\x78\x01"
    assert HloModuleProto.FromString(data).SerializeToString() == data


def test_literal_arrays_survive_a_snapshot_file(tmp_path: Path) -> None:
    snapshot = HloSnapshot()
    snapshot.hlo.hlo_module.name = "m"
    snapshot.arguments.add().CopyFrom(numpy_to_literal(np.ones(3, ml_dtypes.float8_e4m3fn)))
    path = tmp_path / "x.snapshot.1.pb"
    path.write_bytes(snapshot.SerializeToString())
    got = literal_to_array(read_snapshot(path).arguments[0])
    assert got.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "content",
    [b"\xff\xff\xff garbage", b"", b"\x1f\x8b\x08\x00truncated gzip", b"\x12\x00"],
    ids=["garbage", "empty", "bad-gzip", "no-module"],
)
def test_corrupt_files_raise_with_the_file_name(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "module_0001.jit_f.snapshot.7.pb"
    path.write_bytes(content)
    for reader in (read_snapshot, read_hlo_proto):
        with pytest.raises(BugkitError) as err:
            reader(path)
        message = str(err.value)
        assert str(path) in message and "\n" not in message


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(BugkitError, match=r"cannot read .*nope\.pb: No such file"):
        hlo_proto.read_snapshot(tmp_path / "nope.pb")


def test_argument_shapes_skip_the_values_and_agree_with_the_whole_read(tmp_path: Path) -> None:
    from xla_bugkit.hlo.literal import numpy_to_wire

    arguments = [np.ones((64, 32), np.float32), np.arange(5, dtype=np.int32), np.float64(2.5)]
    snapshot = HloSnapshot()
    snapshot.hlo.hlo_module.name = "m"
    for a in arguments:
        snapshot.arguments.add().CopyFrom(numpy_to_literal(a))
    snapshot.arguments.add().CopyFrom(numpy_to_literal((np.ones(2, np.float32), np.int8(1))))
    data = snapshot.SerializeToString()
    # The wire parts written for a recorded snapshot hold the same bytes.
    parts = hlo_proto.snapshot_parts(
        snapshot.hlo.SerializeToString(),
        [numpy_to_wire(a)[1] for a in arguments] + [[snapshot.arguments[3].SerializeToString()]],
    )
    assert b"".join(parts) == data
    plain, packed = tmp_path / "a.snapshot.1.pb", tmp_path / "b.snapshot.1.pb"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    whole = [a.shape for a in read_snapshot(plain).arguments]
    assert hlo_proto.argument_shapes(plain) == hlo_proto.argument_shapes(packed) == whole
    # A literal whose shape is not its first field is read whole.
    moved = LiteralProto()
    moved.MergeFromString(numpy_to_literal(np.ones(3, np.float32)).SerializeToString())
    odd = b"\x12" + bytes([len(b"\x2a\x00" + moved.SerializeToString())]) + b"\x2a\x00"
    (tmp_path / "c.pb").write_bytes(odd + moved.SerializeToString())
    assert hlo_proto.argument_shapes(tmp_path / "c.pb") == [moved.shape]
    for cut in (len(data) - 7, len(data) // 2, 3):  # a file cut short says so
        (tmp_path / "cut.pb").write_bytes(data[:cut])
        with pytest.raises(BugkitError, match="not a readable HloSnapshot"):
            hlo_proto.argument_shapes(tmp_path / "cut.pb")
