"""A stranger's bundle cannot make a replay write outside its own folder.

Every way a bundle can hand XLA an option is tried on a real bundle, resealed so that its
integrity check passes: the debug options and per-compile overrides inside
``compile_options.pb``, the module's ``debug_options`` dump, the manifest's flags (written with
one dash, with ``no``, with a relative path), and environment variables in the manifest. Each
one names a folder; after ``verify`` none of them exists, the bundle's failure still
reproduces, and each option left out is named in the output.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit.cli.main import main
from xla_bugkit.hlo import compile_options, protowire

pytestmark = pytest.mark.slow  # a real collect, and real replays

PJRT_OPTIONS = "modules/module_0000.jit_train_step/pjrt/compile_options.pb"
DEBUG_OPTIONS = "modules/module_0000.jit_train_step/module_0000.jit_train_step.debug_options"


def field(number: int, value: bytes | int) -> bytes:
    """One protobuf field: a varint, or length-delimited bytes."""
    if isinstance(value, int):
        return protowire.encode_varint(number << 3) + protowire.encode_varint(value)
    return protowire.length_field(number, value)


def override(name: str, value: bytes | int, kind: int) -> bytes:
    """An ``env_option_overrides`` map entry (CompileOptionsProto field 7); ``kind`` is the
    OptionOverrideProto field: 1 string, 2 bool."""
    return field(7, field(1, name.encode()) + field(2, field(kind, value)))


def with_debug_options(serialized: bytes, extra: bytes) -> bytes:
    """``serialized`` with ``extra`` fields appended to its build options' DebugOptions
    (appended fields win over earlier ones when XLA parses it)."""
    out = bytearray()
    for number, _, whole, payload in compile_options._fields(serialized):
        if number != 3:
            out += whole
            continue
        build = bytearray()
        for inner, _, inner_whole, inner_payload in compile_options._fields(payload):
            build += field(3, inner_payload + extra) if inner == 3 else inner_whole
        out += field(3, bytes(build))
    return bytes(out)


def reseal(src: Path, dest: Path, change: dict[str, bytes]) -> Path:
    """A copy of the zip bundle ``src`` with members replaced and the manifest's sizes and
    sha256 sums updated to match, as an attacker would."""
    with zipfile.ZipFile(src) as z:
        members = {name: z.read(name) for name in z.namelist()}
    members.update(change)
    manifest = json.loads(members["manifest.json"])
    for entry in manifest["files"]:
        data = members[entry["path"]]
        entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dest, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return dest


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle of a compile error that a flag causes (so the flags must still reach
    the replay), with a PJRT folder."""
    out = tmp_path_factory.mktemp("untrusted") / "bug.zip"
    done = run_collect(out, [sys.executable, str(PROGRAMS / "compile_error.py")], "-q")
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        assert PJRT_OPTIONS in z.namelist() and DEBUG_OPTIONS in z.namelist()
    return out


def test_no_option_in_a_hostile_bundle_writes_outside_the_replay(
    bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    targets = {v: tmp_path / "written" / v for v in
               ("debug", "override", "flag", "no", "text", "env", "relative")}  # fmt: skip
    with zipfile.ZipFile(bundle) as z:
        options = z.read(PJRT_OPTIONS)
        debug_text = z.read(DEBUG_OPTIONS).decode()
        manifest = json.loads(z.read("manifest.json"))
    # compile_options.pb: DebugOptions xla_dump_to (109) with a format (112), and a GPU
    # autotune results file (222); overrides naming a dump folder and turning a format on.
    debug = field(109, str(targets["debug"]).encode()) + field(112, 1)
    debug += field(222, str(targets["debug"] / "autotune.txt").encode())
    options = with_debug_options(options, debug)
    options += override("xla_dump_to", str(targets["override"]).encode(), 1)
    options += override("xla_dump_hlo_as_text", 1, 2)
    # The module's debug options dump, read by name.
    debug_text += f'xla_dump_to: "{targets["text"]}"\n'
    debug_text += f'xla_gpu_per_fusion_autotune_cache_dir: "{targets["text"]}"\n'
    # The manifest's flags: one dash, a "no" that is not a boolean, a relative path.
    manifest["xla_flags"] += [
        f"-xla_dump_to={targets['flag']}",
        "-xla_dump_hlo_as_text",
        f"--noxla_dump_to={targets['no']}",
        "--xla_gpu_cuda_data_dir=../../written/relative",
        f"--xla_cpu_max_isa={targets['flag']}",
        "--xla_backend_extra_options=xla_llvm_print_to=written",
    ]
    # Environment variables: never applied, whatever a manifest says.
    manifest["process"]["env"] = {
        "XLA_FLAGS": f"--xla_dump_to={targets['env']}",
        "LIBTPU_INIT_ARGS": f"--xla_mosaic_dump_to={targets['env']}",
        "TF_CPP_VMODULE": "dump=5",
        "TF_DUMP_GRAPH_PREFIX": str(targets["env"]),
    }
    hostile = reseal(bundle, tmp_path / "hostile.zip", {
        PJRT_OPTIONS: options,
        DEBUG_OPTIONS: debug_text.encode(),
        "manifest.json": json.dumps(manifest).encode(),
    })  # fmt: skip
    (tmp_path / "written").mkdir()

    assert main(["verify", str(hostile)]) == 0
    out = capsys.readouterr().out

    assert "reproduced: error (as in the reporter's replay)" in out  # the real flag still applies
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == []
    not_applied = [line.strip() for line in out.splitlines() if "not applied:" in line]
    assert f"not applied: -xla_dump_to={targets['flag']} (it is about files)" in not_applied
    assert f"not applied: --xla_cpu_max_isa={targets['flag']} (its value could name a file)" in (
        not_applied
    )
    assert "not applied: --xla_gpu_cuda_data_dir=../../written/relative (it is about files)" in (
        not_applied
    )
    assert f"not applied: xla_dump_to={targets['override']} (it is about files)" in not_applied
    assert "not applied: xla_dump_hlo_as_text=true (it is about files)" in not_applied
    assert any(line.startswith("not applied: --xla_gpu_per_fusion") for line in not_applied)


def test_compile_options_keep_layout_and_partitioning_but_no_debug_options(
    bundle: Path,
) -> None:
    from jax._src.lib import xla_client

    with zipfile.ZipFile(bundle) as z:
        raw = z.read(PJRT_OPTIONS)
    hostile = with_debug_options(raw, field(109, b"/somewhere") + field(104, 1))
    hostile += field(11, b"variant")  # the deprecated compiler variant: a string
    taken = compile_options.for_replay(hostile)
    assert b"/somewhere" not in taken.serialized and b"variant" not in taken.serialized
    assert taken.withheld == (
        "compile options fields CompileOptionsProto.11 (not known to be safe)",
    )
    before = xla_client.CompileOptions.ParseFromString(hostile)
    after = xla_client.CompileOptions.ParseFromString(taken.serialized)
    assert before.executable_build_options.debug_options.xla_dump_to == "/somewhere"
    assert after.executable_build_options.debug_options.xla_dump_to == ""
    assert after.executable_build_options.device_assignment is None
    for name in ("num_replicas", "num_partitions", "use_spmd_partitioning"):
        assert getattr(after.executable_build_options, name) == getattr(
            before.executable_build_options, name
        )
    assert compile_options.for_replay(taken.serialized).serialized == taken.serialized


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"\x1a\x05ab", "truncated"), (b"\x0b", "wire type 3"), (b"\x1a\xff", "bad varint")],
)
def test_compile_options_that_are_no_proto_are_refused(data: bytes, why: str) -> None:
    from xla_bugkit.errors import BugkitError

    with pytest.raises(BugkitError) as raised:
        compile_options.for_replay(data)
    assert str(raised.value) == f"compile_options.pb is not a CompileOptionsProto ({why})"
