"""dumps: index a real dump directory (written by a real jax run) and synthetic file names."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.programs import ProgramRuns
from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role, index

# --- real dumps ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(program_runs: ProgramRuns) -> DumpIndex:
    run = program_runs["two_functions"]
    assert run.completed.returncode == 0, run.output[-2000:]
    return index(run.dump_dir)


def module_named(idx: DumpIndex, name: str) -> DumpModule:
    (module,) = [m for m in idx.modules if m.name == name]
    return module


def test_real_dump_modules_in_compile_order(real: DumpIndex) -> None:
    names = [m.name for m in real.modules]
    ids = [m.id for m in real.modules]
    assert ids == sorted(ids)
    assert names.count("jit_step") == 1 and names.count("jit_scale") == 1
    assert names.index("jit_step") < names.index("jit_scale")
    # jnp helpers compile modules of their own.
    assert {"jit_convert_element_type", "jit_broadcast_in_dim"} <= set(names)
    assert names[0] == "jit_convert_element_type"
    step = module_named(real, "jit_step")
    assert step.label == f"module_{step.id:04d}.jit_step"
    assert real.by_label(step.label) == step
    assert real.by_label("module_9999.jit_nothing") is None


def test_real_dump_every_file_is_indexed_once(real: DumpIndex) -> None:
    on_disk = {
        Path(folder, name).relative_to(real.root)
        for folder, _, names in os.walk(real.root)
        for name in names
    }
    indexed = [f.path for m in real.modules for f in m.files] + [f.path for f in real.stray]
    assert sorted(indexed) == sorted(on_disk)
    assert real.file_count == len(on_disk)
    assert real.stray == ()
    for m in real.modules:
        for f in m.files:
            stat = (real.root / f.path).stat()
            assert f.size == stat.st_size and f.mtime == stat.st_mtime
        assert m.size == sum(f.size for f in m.files)


def test_real_dump_roles(real: DumpIndex) -> None:
    step = module_named(real, "jit_step")
    label = step.label
    expected = {
        Role.BEFORE_TEXT: f"{label}.before_optimizations.txt",
        Role.BEFORE_PROTO: f"{label}.before_optimizations.hlo.pb",
        Role.AFTER_TEXT: f"{label}.cpu_after_optimizations.txt",
        Role.AFTER_PROTO: f"{label}.cpu_after_optimizations.hlo.pb",
        Role.BUFFER_ASSIGNMENT: f"{label}.cpu_after_optimizations-buffer-assignment.txt",
        Role.BUFFER_VALUES: f"{label}.cpu_after_optimizations-buffer-assignment-values.txt",
        Role.LIVE_RANGE: f"{label}.cpu_after_optimizations-live-range.txt",
        Role.DEBUG_OPTIONS: f"{label}.debug_options",
        Role.PJRT_MLIR: f"{label}/module.mlir",
        Role.COMPILE_OPTIONS: f"{label}/compile_options.pb",
        Role.TOPOLOGY: f"{label}/topology.pb",
    }
    for role, path in expected.items():
        assert [f.path for f in step.all(role)] == [Path(path)], role
    assert {f.path.name for f in step.all(Role.MEMORY_REPORT)} == {
        f"{label}.cpu_after_optimizations-memory-usage-report.txt",
        f"{label}.cpu_after_optimizations-memory-usage-report.pb",
    }
    (snapshot,) = step.all(Role.SNAPSHOT)
    assert snapshot.path.name.startswith(f"{label}.snapshot.")
    backend = {f.path.suffix for f in step.all(Role.BACKEND)}
    assert backend == {".ll", ".o"}
    # --xla_dump_hlo_pass_re=^dce$: the passes around each dce run.
    passes = step.all(Role.PASS_DUMP)
    assert passes and all("dce" in f.path.name for f in passes)
    assert [f for f in step.all(Role.OTHER) if not is_pass_proto(f.path)] == []
    assert step.compiled
    assert step.platform == "cpu"
    assert {f.platform for f in step.files if f.role is Role.AFTER_TEXT} == {"cpu"}


def test_real_dump_all_modules_compiled_on_cpu(real: DumpIndex) -> None:
    for m in real.modules:
        assert m.compiled and m.platform == "cpu", m.label
        assert m.first(Role.BEFORE_PROTO) is not None
        assert [f for f in m.all(Role.OTHER) if not is_pass_proto(f.path)] == [], m.label


def is_pass_proto(path: Path) -> bool:
    """A pass dump written as a proto (--xla_dump_hlo_as_proto with a pass filter)."""
    return bool(re.search(r"\.\d{4}\.[\w.-]+\.(?:before|after)_[\w.-]+\.hlo\.pb$", path.name))


def test_real_pass_dump_protos_are_pass_dumps(real: DumpIndex) -> None:
    step = module_named(real, "jit_step")
    protos = [f for f in step.files if is_pass_proto(f.path)]
    assert protos
    assert {f.role for f in protos} == {Role.PASS_DUMP}


def test_real_dump_has_large_constants(real: DumpIndex) -> None:
    scale = module_named(real, "jit_scale")
    before = scale.first(Role.BEFORE_TEXT)
    assert before is not None
    assert "1999" in (real.root / before.path).read_text("utf-8")


# --- the index opens no file ---------------------------------------------------------------

_opened: list[str] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _opened is not None and event == "open" and args and isinstance(args[0], (str, Path)):
        _opened.append(os.fspath(args[0]))


_hook_installed = False


@contextlib.contextmanager
def opened_files() -> Iterator[list[str]]:
    """Paths opened while the block runs (audit hooks cannot be removed: install one once)."""
    global _opened, _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def test_index_opens_no_file(program_runs: ProgramRuns) -> None:
    root = program_runs["two_functions"].dump_dir
    with opened_files() as control:
        (root / "module_0000.jit_convert_element_type.debug_options").open("rb").close()
    assert any(p.startswith(str(root)) for p in control), "the audit hook sees opens"
    with opened_files() as seen:
        idx = index(root)
    assert idx.modules
    assert [p for p in seen if p.startswith(str(root))] == []


# --- synthetic names -----------------------------------------------------------------------


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


def only(idx: DumpIndex, label: str) -> DumpModule:
    module = idx.by_label(label)
    assert module is not None, [m.label for m in idx.modules]
    return module


def roles(module: DumpModule) -> dict[str, Role]:
    return {f.path.as_posix(): f.role for f in module.files}


def test_timestamp_prefix(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "1700000000000000.module_0001.jit_f.before_optimizations.txt",
        "1700000000000001.module_0001.jit_f.cpu_after_optimizations.txt",
        "1700000000000002.module_0001.jit_f.execution_0001.hlo_snapshot.pb",
    )
    (m,) = index(tmp_path).modules
    assert (m.id, m.name, m.label) == (1, "jit_f", "module_0001.jit_f")
    assert sorted(f.role.value for f in m.files) == sorted(
        [Role.BEFORE_TEXT.value, Role.AFTER_TEXT.value, Role.SNAPSHOT.value]
    )
    assert m.compiled and m.platform == "cpu"


def test_names_with_dots(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0003.SyncTensorsGraph.12.before_optimizations.txt",
        "module_0003.SyncTensorsGraph.12.before_optimizations.hlo.pb",
        "module_0003.SyncTensorsGraph.12.after_optimizations.txt",
        "module_0003.SyncTensorsGraph.12.0001.pipeline.after_a.before_b.txt",
        "module_0003.SyncTensorsGraph.12.fusion.1.ll",
    )
    (m,) = index(tmp_path).modules
    assert m.name == "SyncTensorsGraph.12"
    assert roles(m) == {
        "module_0003.SyncTensorsGraph.12.before_optimizations.txt": Role.BEFORE_TEXT,
        "module_0003.SyncTensorsGraph.12.before_optimizations.hlo.pb": Role.BEFORE_PROTO,
        "module_0003.SyncTensorsGraph.12.after_optimizations.txt": Role.AFTER_TEXT,
        "module_0003.SyncTensorsGraph.12.0001.pipeline.after_a.before_b.txt": Role.PASS_DUMP,
        "module_0003.SyncTensorsGraph.12.fusion.1.ll": Role.BACKEND,
    }
    assert m.compiled and m.platform == ""


def test_names_with_dots_and_a_platform(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0003.SyncTensorsGraph.12.before_optimizations.txt",
        "module_0003.SyncTensorsGraph.12.gpu_after_optimizations.txt",
        "module_0003.SyncTensorsGraph.12.gpu_after_optimizations-buffer-assignment.txt",
    )
    (m,) = index(tmp_path).modules
    assert m.name == "SyncTensorsGraph.12"
    assert m.compiled and m.platform == "gpu"


def test_gpu_names(tmp_path: Path) -> None:
    # Real GPU dumps cannot be made here (no GPU); these are the names XLA writes there.
    touch(
        tmp_path,
        "module_0005.jit_g.before_optimizations.txt",
        "module_0005.jit_g.gpu_after_optimizations.txt",
        "module_0005.jit_g.gpu_after_optimizations-buffer-assignment.txt",
        "module_0005.jit_g.gpu_after_optimizations-memory-usage-report.txt",
        "module_0005.jit_g.autotune_results.pbtxt",
        "module_0005.jit_g.gpu_target_config.pbtxt",
        "module_0005.jit_g.ptx",
        "module_0006.jit_h.sm_9.0_gpu_after_optimizations.txt",
        "module_0006.jit_h.sm_9.0_gpu_after_optimizations.hlo.pb",
        "module_0007.jit_k.after_optimizations.txt",
    )
    idx = index(tmp_path)
    g = only(idx, "module_0005.jit_g")
    assert g.platform == "gpu" and g.compiled
    assert roles(g) == {
        "module_0005.jit_g.before_optimizations.txt": Role.BEFORE_TEXT,
        "module_0005.jit_g.gpu_after_optimizations.txt": Role.AFTER_TEXT,
        "module_0005.jit_g.gpu_after_optimizations-buffer-assignment.txt": Role.BUFFER_ASSIGNMENT,
        "module_0005.jit_g.gpu_after_optimizations-memory-usage-report.txt": Role.MEMORY_REPORT,
        "module_0005.jit_g.autotune_results.pbtxt": Role.AUTOTUNE,
        "module_0005.jit_g.gpu_target_config.pbtxt": Role.GPU_TARGET,
        "module_0005.jit_g.ptx": Role.BACKEND,
    }
    h = only(idx, "module_0006.jit_h")
    assert h.platform == "sm_9.0_gpu"
    assert {f.role for f in h.files} == {Role.AFTER_TEXT, Role.AFTER_PROTO}
    k = only(idx, "module_0007.jit_k")
    assert k.compiled and k.platform == ""


def test_snapshots_and_compressed_protos(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0008.jit_f.execution_0001.hlo_snapshot.pb",
        "module_0008.jit_f.snapshot.-42.pb",
        "module_0008.jit_f.snapshot.42.pb",
        "module_0009.jit_z.before_optimizations.hlo.pb.gz",
        "module_0009.jit_z.cpu_after_optimizations.hlo.pb.gz",
    )
    idx = index(tmp_path)
    assert {f.role for f in only(idx, "module_0008.jit_f").files} == {Role.SNAPSHOT}
    assert len(only(idx, "module_0008.jit_f").all(Role.SNAPSHOT)) == 3
    z = only(idx, "module_0009.jit_z")
    assert roles(z) == {
        "module_0009.jit_z.before_optimizations.hlo.pb.gz": Role.BEFORE_PROTO,
        "module_0009.jit_z.cpu_after_optimizations.hlo.pb.gz": Role.AFTER_PROTO,
    }
    assert z.compiled


def test_unknown_suffixes_are_kept_as_other(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0009.jit_z.before_optimizations.txt",
        "module_0009.jit_z.something_new.xyz",
        "module_0009.jit_z.kernel.ll",
        "module_0016.jit_w.only_unknown.bin",
        "module_0015.jit_f/other.bin",
    )
    idx = index(tmp_path)
    assert roles(only(idx, "module_0009.jit_z")) == {
        "module_0009.jit_z.before_optimizations.txt": Role.BEFORE_TEXT,
        "module_0009.jit_z.something_new.xyz": Role.OTHER,
        "module_0009.jit_z.kernel.ll": Role.BACKEND,
    }
    # No known name for this id: the first dotted part names the module.
    assert roles(only(idx, "module_0016.jit_w")) == {
        "module_0016.jit_w.only_unknown.bin": Role.OTHER
    }
    assert roles(only(idx, "module_0015.jit_f")) == {"module_0015.jit_f/other.bin": Role.OTHER}
    assert idx.stray == ()


def test_same_id_with_two_names_is_two_modules(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0010.jit_a.before_optimizations.txt",
        "module_0010.jit_a.cpu_after_optimizations.txt",
        "module_0010.jit_a.fusion_kernel.ll",
        "module_0010.jit_a_b.before_optimizations.txt",
        "module_0010.jit_a_b.fusion_kernel.o",
    )
    idx = index(tmp_path)
    assert [m.label for m in idx.modules] == ["module_0010.jit_a", "module_0010.jit_a_b"]
    a, ab = idx.modules
    assert a.compiled and not ab.compiled
    assert "module_0010.jit_a.fusion_kernel.ll" in roles(a)
    assert roles(ab)["module_0010.jit_a_b.fusion_kernel.o"] is Role.BACKEND


def test_pass_dumps(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "module_0011.jit_p.before_optimizations.txt",
        "module_0011.jit_p.0000.simplification.after_pipeline-start.before_dce.txt",
        "module_0011.jit_p.0001.simplification.after_dce.before_cse.txt",
    )
    (m,) = index(tmp_path).modules
    assert [f.role for f in m.files].count(Role.PASS_DUMP) == 2
    assert not m.compiled


def test_stray_files(tmp_path: Path) -> None:
    touch(
        tmp_path,
        "README",
        "mosaic/kernel.mlir",
        "module_0012.jit_q/nested/deep.txt",
        "not_a_module.before_optimizations.txt",
        "module_0012.jit_q.before_optimizations.txt",
    )
    idx = index(tmp_path)
    assert [m.label for m in idx.modules] == ["module_0012.jit_q"]
    assert sorted(f.path.as_posix() for f in idx.stray) == [
        "README",
        "module_0012.jit_q/nested/deep.txt",
        "mosaic/kernel.mlir",
        "not_a_module.before_optimizations.txt",
    ]
    assert all(f.role is Role.OTHER for f in idx.stray)
    assert idx.file_count == 5


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside, "real.txt", "module_0020.jit_far/module.mlir")
    root = tmp_path / "dump"
    touch(root, "module_0001.jit_f.before_optimizations.txt")
    (root / "module_0013.jit_link.before_optimizations.txt").symlink_to(outside / "real.txt")
    (root / "module_0014.jit_dirlink").symlink_to(outside / "module_0020.jit_far")
    (root / "loop").symlink_to(root)
    idx = index(root)
    assert [m.label for m in idx.modules] == ["module_0001.jit_f"]
    assert idx.stray == ()
    assert idx.file_count == 1


def test_empty_dir(tmp_path: Path) -> None:
    idx = index(tmp_path)
    assert idx.modules == () and idx.stray == () and idx.file_count == 0


def test_an_unpacked_bundles_modules_index_as_their_dump_did(tmp_path: Path) -> None:
    # A bundle keeps each module's files in modules/module_NNNN.NAME/, its PJRT folder in
    # pjrt/ there: replay may be pointed at the bundle, at modules/ or at one module.
    folder = tmp_path / "modules" / "module_0006.jit_train_step"
    (folder / "pjrt").mkdir(parents=True)
    for name in (
        "module_0006.jit_train_step.before_optimizations.txt",
        "module_0006.jit_train_step.before_optimizations.hlo.pb",
        "pjrt/module.mlir",
        "pjrt/compile_options.pb",
    ):
        (folder / name).write_bytes(b"x")
    (tmp_path / "ISSUE.md").write_text("x")
    for root in (tmp_path, tmp_path / "modules", folder):
        (module,) = index(root).modules
        assert (module.id, module.name) == (6, "jit_train_step"), root
        roles = {f.role for f in module.files}
        assert {Role.BEFORE_TEXT, Role.BEFORE_PROTO, Role.PJRT_MLIR, Role.COMPILE_OPTIONS} <= roles
        assert all((root / f.rel).is_file() for f in module.files)


# --- one compile under two numbers (a TPU's) --------------------------------------------------

TPU_LISTING = Path(__file__).parent / "data" / "tpu_one_compile_two_numbers.txt"


def tpu_dump(root: Path) -> DumpIndex:
    """The TPU's dump of ``TPU_LISTING``, its files made empty under ``root``."""
    for line in TPU_LISTING.read_text("utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        if line.endswith("/"):
            touch(
                root, *(f"{line}{f}" for f in ("compile_options.pb", "module.mlir", "topology.pb"))
            )
        else:
            touch(root, line)
    return index(root)


def test_a_compile_the_tpu_dumped_under_two_numbers_is_one_module(tmp_path: Path) -> None:
    idx = tpu_dump(tmp_path)
    normal = [m for m in idx.modules if m.name == "jit__normal.cl_933746096"]
    # Two compiles, each one module under its first number, compiled, with its own
    # before-optimizations module and its after-optimizations files and buffer assignment.
    assert [m.id for m in normal] == [19, 52]
    for module, second in zip(normal, (22, 55), strict=True):
        assert module.compiled
        before, after = module.first(Role.BEFORE_PROTO), module.first(Role.AFTER_PROTO)
        assert before is not None and before.name.startswith(f"module_{module.id:04d}.")
        assert after is not None and after.name.startswith(f"module_{second:04d}.")
        assert module.first(Role.BUFFER_ASSIGNMENT) is not None
        assert module.platform == "tpu"
        # Its own debug options first: what the replay applies.
        options = module.first(Role.DEBUG_OPTIONS)
        assert options is not None and options.name.startswith(f"module_{module.id:04d}.")
    # The compile that failed stays unfinished, alone.
    step = only(idx, "module_0090.jit_step.cl_933746096")
    assert not step.compiled
    assert [m.id for m in idx.modules] == [19, 52, 90]


def test_a_compile_that_did_not_finish_is_not_joined_to_a_later_ones_files(tmp_path: Path) -> None:
    # The first jit_f died part-way; it was compiled again (numbers 3 and 4 for that one).
    touch(
        tmp_path,
        "module_0001.jit_f.before_optimizations.txt",
        "module_0003.jit_f.before_optimizations.txt",
        "module_0004.jit_f.after_optimizations.txt",
    )
    idx = index(tmp_path)
    assert [(m.id, m.compiled) for m in idx.modules] == [(1, False), (3, True)]


def test_the_tpus_failed_compile_is_chosen_alone_not_its_finished_neighbours(
    tmp_path: Path,
) -> None:
    """bf16_train_step's recorded run (its failure and output): before the two numbers were
    one module, the jit__normal modules were chosen beside jit_step as compiles that "did
    not finish" (and replayed against their references)."""
    import json
    import zipfile

    from xla_bugkit.choose.selection import select
    from xla_bugkit.failure.classify import Failure

    recorded = Path(__file__).parents[1] / "tpu" / "recorded" / "bf16_train_step.zip"
    with zipfile.ZipFile(recorded) as z:
        failure = Failure.from_json(json.loads(z.read("manifest.json"))["failure"])
        output = z.read("log.txt").decode()
    chosen = select(tpu_dump(tmp_path), failure, output).chosen
    assert [c.module.label for c in chosen] == ["module_0090.jit_step.cl_933746096"]
