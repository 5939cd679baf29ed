"""Tests for xla_bugkit.redact's binary protos: strings found by structure and rewritten with
their lengths, numbers never touched, what is left reported; and a real jax program's dump
under a path that names its user and host, redacted and loaded again by jaxlib."""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.programs import clean_env
from xla_bugkit import jaxlib_adapter
from xla_bugkit.bundle import layout
from xla_bugkit.choose.dumps import Role
from xla_bugkit.hlo import hlo_proto, protowire
from xla_bugkit.redact import HOME_PATH, HOST, HOST_NAME, USER, USER_NAME, Redactor

ALICE = Redactor(home="/home/alice", user="alice", host="alice-box")
SOURCE = "/home/alice/proj/train.py"
# A constant's values whose bytes spell a home and a user name: numbers, never rewritten.
NUMBERS = b"/home/alice/x.py"


def s(number: int, value: bytes | str) -> bytes:
    return protowire.length_field(number, value.encode() if isinstance(value, str) else value)


def v(number: int, value: int) -> bytes:
    return protowire.encode_varint(number << 3) + protowire.encode_varint(value)


def hlo(source: str, frame_file: str, function: str = "train_step") -> bytes:
    """An HloProto: a module, one computation, one constant with metadata and a literal, and
    a stack frame index; the field numbers are XLA's (hlo.proto, xla_data.proto)."""
    literal = s(1, v(2, 11) + v(3, 4)) + s(8, NUMBERS)
    metadata = s(1, "add") + s(2, "jit(f)/add") + s(3, source) + v(4, 7)
    instruction = s(1, "constant.1") + s(2, "constant") + s(7, metadata) + s(8, literal)
    computation = s(1, "main") + s(2, instruction + v(35, 1)) + v(5, 1)
    frames = s(1, frame_file) + s(2, function) + s(3, v(1, 1) + v(2, 1) + v(3, 7))
    module = s(1, "jit_f") + s(2, "main") + s(3, computation) + v(5, 1) + s(17, frames)
    return s(1, module)


def snapshot(module: bytes) -> bytes:
    argument = s(1, v(2, 11)) + s(8, NUMBERS * 3)
    return s(1, module) + s(2, argument) + s(3, argument) + s(4, "Host")


def test_hlo_proto_strings_are_redacted_with_new_lengths(tmp_path: Path) -> None:
    src, dst = tmp_path / "m.before_optimizations.hlo.pb", tmp_path / "out.hlo.pb"
    src.write_bytes(hlo(SOURCE, SOURCE, "alice-box"))
    copied = ALICE.copy_binary(src, dst)
    # Everything else byte for byte, the literal's "/home/alice/x.py" bytes included.
    assert dst.read_bytes() == hlo("~/proj/train.py", "~/proj/train.py", HOST)
    assert copied.counts == Counter({HOME_PATH: 2, HOST_NAME: 1}) and copied.left == ()
    assert hlo_proto.read_hlo_proto(dst).hlo_module.name == "jit_f"


def test_a_snapshots_arguments_stream_through_untouched(tmp_path: Path) -> None:
    src, dst = tmp_path / "m.snapshot.7.pb", tmp_path / "out.pb"
    src.write_bytes(snapshot(hlo(SOURCE, SOURCE)))
    expected = snapshot(hlo("~/proj/train.py", "~/proj/train.py"))
    # A chunk of 7 bytes puts every field across a boundary between reads.
    for chunk in (7, 8 << 20):
        assert ALICE.copy_binary(src, dst, chunk=chunk).left == ()
        assert dst.read_bytes() == expected
    assert hlo_proto.read_snapshot(dst).arguments == hlo_proto.read_snapshot(src).arguments


def test_a_gzip_compressed_proto_is_redacted_and_compressed_again(tmp_path: Path) -> None:
    src, dst = tmp_path / "m.after_optimizations.hlo.pb.gz", tmp_path / "out.hlo.pb.gz"
    src.write_bytes(gzip.compress(hlo(SOURCE, SOURCE)))
    assert ALICE.copy_binary(src, dst).counts == Counter({HOME_PATH: 2})
    assert gzip.decompress(dst.read_bytes()) == hlo("~/proj/train.py", "~/proj/train.py")


def compile_options(path: str, value: str) -> bytes:
    """A CompileOptionsProto: debug options with a dump folder (DebugOptions.xla_dump_to is
    109) and a per-compile override with a string value."""
    debug = v(2, 1) + s(109, path) + s(258, b"\x05\x02\x08")  # 258: a packed enum list
    override = s(1, "xla_gpu_cuda_data_dir") + s(2, s(1, value))
    return s(3, v(1, 1) + s(3, debug)) + s(7, override) + v(9, 1)


def test_compile_options_debug_options_and_overrides(tmp_path: Path) -> None:
    src, dst = tmp_path / "compile_options.pb", tmp_path / "out.pb"
    src.write_bytes(compile_options("/home/alice/dumps", "/scratch/alice-box/alice/cuda"))
    copied = ALICE.copy_binary(src, dst)
    assert dst.read_bytes() == compile_options("~/dumps", f"/scratch/{HOST}/{USER}/cuda")
    assert copied.counts == Counter({HOME_PATH: 1, HOST_NAME: 1, USER_NAME: 1})


def big_module(op_name: str, source: str) -> bytes:
    """A module whose computations are large enough to be searched before they are walked:
    one with nothing to redact, one with an instruction of this op name and source file."""
    filler = (s(1, "add.1") + s(2, "add") + s(7, s(2, "jit(f)/add") + v(15, 1))) * 3000
    quiet = s(1, "quiet") + s(2, filler)
    loud = s(1, "loud") + s(2, filler) + s(2, s(1, "c.1") + s(7, s(2, op_name) + s(3, source)))
    return s(1, s(1, "jit_f") + s(3, quiet) + s(3, loud))


@pytest.mark.parametrize(
    ("op_name", "source", "expected"),
    [
        ("jit(f)/add", "/home/alice/x.py", ("jit(f)/add", "~/x.py")),
        ("secret: hunter2x", "x.py", ("secret: <REDACTED>", "x.py")),
        # "\u017f" (long s) is an "s" to a case-insensitive match: the search must see it.
        ("\u017fecret: hunter2x", "x.py", ("\u017fecret: <REDACTED>", "x.py")),
    ],
)
def test_large_messages_are_searched_first_and_nothing_is_missed(
    tmp_path: Path, op_name: str, source: str, expected: tuple[str, str]
) -> None:
    src, dst = tmp_path / "m.hlo.pb", tmp_path / "out.hlo.pb"
    src.write_bytes(big_module(op_name, source))
    copied = ALICE.copy_binary(src, dst)
    assert dst.read_bytes() == big_module(*expected)
    assert sum(copied.counts.values()) == 1 and copied.left == ()


def test_what_no_known_field_holds_is_left_and_reported(tmp_path: Path) -> None:
    # backend_config (HloInstructionProto 43) is free-form: searched, never rewritten.
    config = s(43, '{"cache": "/home/alice/cache"}')
    module = s(1, "jit_f") + s(3, s(2, s(1, "custom-call.1") + config))
    src, dst = tmp_path / "m.hlo.pb", tmp_path / "out.hlo.pb"
    src.write_bytes(s(1, module))
    copied = ALICE.copy_binary(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert copied.left == (HOME_PATH,)


@pytest.mark.parametrize("data", [b"\x0a\xff\xff\xff/home/alice/x", b"\x0f/home/alice/x"])
def test_a_file_that_is_not_the_proto_its_name_says_is_copied_and_reported(
    tmp_path: Path, data: bytes
) -> None:
    src, dst = tmp_path / "m.hlo.pb", tmp_path / "out.hlo.pb"
    src.write_bytes(data)
    copied = ALICE.copy_binary(src, dst)
    assert dst.read_bytes() == data
    assert copied.counts == Counter() and copied.left == (HOME_PATH,)


def test_the_bundle_notes_name_the_file_that_still_holds_a_name(tmp_path: Path) -> None:
    (tmp_path / "dump").mkdir()
    module = s(1, "jit_f") + s(3, s(2, s(1, "c.1") + s(43, "/home/alice/cache")))
    (tmp_path / "dump" / "m.before.hlo.pb").write_bytes(s(1, module))
    (tmp_path / "dump" / "m.after.hlo.pb").write_bytes(hlo(SOURCE, SOURCE))
    planned = [
        layout.Planned(tmp_path / "dump" / f"m.{w}.hlo.pb", f"modules/m/m.{w}.hlo.pb", r, "m")
        for w, r in (("before", Role.BEFORE_PROTO), ("after", Role.AFTER_PROTO))
    ]
    notes: list[str] = []
    counts = layout.stage(planned, tmp_path / "stage", ALICE, notes)
    assert counts == Counter({HOME_PATH: 2})
    assert notes == ["not redacted: a home path in modules/m/m.before.hlo.pb (binary data)"]


# A program under /scratch/<host>/<user>/ (outside any home): its source file reaches the
# op metadata, the stack frame index and, through a compiler option, compile_options.pb. The
# PRNG key, the token parameter and the ordered print put look-alikes of secrets in the HLO.
PROGRAM = """
import os
import jax, jax.numpy as jnp

def f(x, key, token):
    jax.debug.print("sum={s}", s=x.sum(), ordered=True)
    return jnp.sin(x) @ x + jax.random.normal(key, x.shape) * token

g = jax.jit(f, compiler_options={"xla_gpu_cuda_data_dir": os.getcwd() + "/cuda"})
print(g(jnp.ones((4, 4)), jax.random.key(0), 2.0).sum())
"""
NAMES = Redactor(user="userq7", host="hostx1")


@pytest.fixture(scope="module")
def scratch_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dump (text, protos, snapshots) of PROGRAM run from .../scratch/hostx1/userq7."""
    folder = tmp_path_factory.mktemp("run") / "scratch" / "hostx1" / "userq7"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(PROGRAM)
    dump = folder / "dump"
    flags = (f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto "
             "--xla_dump_hlo_snapshots --xla_dump_hlo_module_re=jit_f")  # fmt: skip
    done = subprocess.run([sys.executable, "train.py"], cwd=folder, env=clean_env(flags),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dump


def test_a_real_dumps_protos_lose_user_and_host_and_still_load(
    scratch_dump: Path, tmp_path: Path
) -> None:
    protos = sorted(scratch_dump.rglob("*.pb"))
    named = [p for p in protos if b"userq7" in p.read_bytes()]
    kinds = {p.name.split(".")[-2] for p in named}
    assert {"hlo", "compile_options"} <= kinds and any("snapshot" in p.name for p in named)
    for src in protos:
        dst = tmp_path / src.name
        copied = NAMES.copy_binary(src, dst)
        data = dst.read_bytes()
        assert b"userq7" not in data and b"hostx1" not in data, src.name
        assert copied.left == (), src.name
        assert (src in named) == (copied.counts[USER_NAME] > 0), src.name
        if src.name.endswith(".hlo.pb"):
            # jaxlib loads it, and only metadata changed: its text without metadata is the same.
            before = hlo_proto.module_bytes(hlo_proto.read_hlo_proto(src))
            after = hlo_proto.module_bytes(hlo_proto.read_hlo_proto(dst))
            assert jaxlib_adapter.module_text(after) == jaxlib_adapter.module_text(before)
        elif "snapshot" in src.name:
            snap = hlo_proto.read_snapshot(dst)
            assert snap.arguments == hlo_proto.read_snapshot(src).arguments
            jaxlib_adapter.module_text(snap.hlo.hlo_module.SerializeToString())
        elif src.name == "compile_options.pb" and src in named:
            assert f"/{HOST}/{USER}/cuda".encode() in data
            assert len(list(protowire.fields(data))) == len(
                list(protowire.fields(src.read_bytes()))
            )


def test_a_real_dumps_text_changes_only_where_it_names_user_and_host(scratch_dump: Path) -> None:
    texts = [p for p in sorted(scratch_dump.rglob("*"))
             if p.name.endswith((".txt", ".mlir", "debug_options"))]  # fmt: skip
    assert any("userq7" in p.read_text() for p in texts)
    assert any("token" in p.read_text() and "key" in p.read_text() for p in texts)
    for path in texts:
        text = path.read_text()
        expected = text.replace("hostx1", HOST).replace("userq7", USER)
        assert NAMES.text(text) == expected, path.name
        # Nothing there looks like a secret, even to a redactor that knows this machine.
        assert ALICE.text(text) == text, path.name


def test_a_copy_made_ahead_is_linked_while_its_source_is_unchanged(tmp_path: Path) -> None:
    src, ahead = tmp_path / "m.snapshot.recorded-7.pb", tmp_path / "ahead"
    src.write_bytes(snapshot(hlo(SOURCE, SOURCE)))
    expected = snapshot(hlo("~/proj/train.py", "~/proj/train.py"))
    copy = ALICE.copy_ahead(src, ahead)
    assert copy.parent == ahead and copy.read_bytes() == expected
    dst = tmp_path / "stage" / "m.pb"
    dst.parent.mkdir()
    copied = ALICE.copy_binary(src, dst)
    # The same bytes, the same file, and what it redacted said as the first copy said it.
    assert dst.read_bytes() == expected and dst.stat().st_ino == copy.stat().st_ino
    assert copied.counts == Counter({HOME_PATH: 2}) and copied.left == ()
    # Another redactor, even of the same machine but another user: copied anew.
    other = tmp_path / "other.pb"
    bob = Redactor(home="/home/alice", user="bob", host="alice-box")
    bob.copy_binary(src, other)
    assert other.stat().st_ino != copy.stat().st_ino
    # A source written again (a new file): redacted from what it now holds.
    again = tmp_path / "again.pb"
    src.write_bytes(snapshot(hlo("/home/alice/proj/eval.py", SOURCE)))
    ALICE.copy_binary(src, again)
    assert again.stat().st_ino != copy.stat().st_ino
    assert again.read_bytes() == snapshot(hlo("~/proj/eval.py", "~/proj/train.py"))
    # A copy changed since it was made is never linked.
    src.write_bytes(snapshot(hlo(SOURCE, SOURCE)))
    copy = ALICE.copy_ahead(src, ahead)
    copy.write_bytes(b"changed")
    last = tmp_path / "last.pb"
    ALICE.copy_binary(src, last)
    assert last.read_bytes() == expected
