"""flags: merging the user's XLA_FLAGS with collect's dump flags, and reading debug_options."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.programs import ProgramRuns, clean_env
from xla_bugkit import proc
from xla_bugkit.hlo import flags

OURS = ("--xla_dump_hlo_as_text", "--xla_dump_hlo_as_proto", "--xla_dump_hlo_snapshots")


def test_merge_keeps_the_users_flags_in_order_then_adds_ours(tmp_path: Path) -> None:
    user = "--xla_cpu_enable_fast_math=false  --xla_backend_optimization_level=1 --xla_foo"
    merged = flags.merge(user, tmp_path)
    assert merged.flags[:3] == (
        "--xla_cpu_enable_fast_math=false",
        "--xla_backend_optimization_level=1",
        "--xla_foo",
    )
    assert merged.flags[3] == f"--xla_dump_to={tmp_path}"
    assert set(OURS) | {"--xla_dump_large_constants"} == set(merged.flags[4:])
    assert merged.user_flags == merged.flags[:3]
    assert merged.notes == ()


@pytest.mark.parametrize("user", [None, "", "   "])
def test_merge_without_user_flags(tmp_path: Path, user: str | None) -> None:
    merged = flags.merge(user, tmp_path)
    assert merged.flags == (f"--xla_dump_to={tmp_path}", *flags.DUMP_FORMAT_FLAGS)
    assert merged.user_flags == () and merged.notes == ()


def test_merge_replaces_the_users_dump_dir_with_a_note(tmp_path: Path) -> None:
    merged = flags.merge("--xla_dump_to=/home/me/dumps --xla_foo=1", tmp_path)
    dump_tos = [f for f in merged.flags if flags.name_of(f) == "--xla_dump_to"]
    assert dump_tos == [f"--xla_dump_to={tmp_path}"]
    assert merged.flags[0] == "--xla_foo=1"
    assert merged.user_flags == ("--xla_dump_to=/home/me/dumps", "--xla_foo=1")
    (note,) = merged.notes
    assert "--xla_dump_to=/home/me/dumps" in note and "replaced" in note
    assert "unchanged" in note


def test_merge_overrides_a_disabled_dump_format_with_a_note(tmp_path: Path) -> None:
    merged = flags.merge("--xla_dump_hlo_as_text=false", tmp_path)
    assert "--xla_dump_hlo_as_text=false" not in merged.flags
    assert merged.flags.count("--xla_dump_hlo_as_text") == 1
    (note,) = merged.notes
    assert note == (
        "your --xla_dump_hlo_as_text=false is overridden: collect needs --xla_dump_hlo_as_text=true"
    )


@pytest.mark.parametrize("flag", ["--xla_dump_hlo_as_proto", "--xla_dump_hlo_as_proto=true"])
def test_merge_drops_a_duplicate_of_our_flag_silently(tmp_path: Path, flag: str) -> None:
    merged = flags.merge(flag, tmp_path)
    assert merged.flags.count("--xla_dump_hlo_as_proto") == 1
    assert flag == "--xla_dump_hlo_as_proto" or flag not in merged.flags
    assert merged.notes == ()


def test_merge_keeps_a_module_filter_with_a_warning(tmp_path: Path) -> None:
    merged = flags.merge("--xla_dump_hlo_module_re=jit_train.*", tmp_path)
    assert merged.flags[0] == "--xla_dump_hlo_module_re=jit_train.*"
    (note,) = merged.notes
    assert "--xla_dump_hlo_module_re=jit_train.*" in note
    assert "kept" in note and "failing module" in note


def test_merge_quoting_round_trips(tmp_path: Path) -> None:
    user = "--xla_foo=\"a b\" --xla_bar='c  d' --xla_baz=e"
    merged = flags.merge(user, tmp_path / "dump dir")
    assert merged.user_flags == ("--xla_foo=a b", "--xla_bar=c  d", "--xla_baz=e")
    assert flags.split(merged.value) == list(merged.flags)
    assert f"--xla_dump_to={tmp_path / 'dump dir'}" in merged.flags


def test_xla_dumps_into_a_dir_with_a_space(program_runs: ProgramRuns) -> None:
    run = program_runs["space_in_dump_dir"]
    assert run.completed.returncode == 0, run.output[-2000:]
    assert " " in str(run.dump_dir)
    assert any(run.dump_dir.iterdir())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        ("", []),
        ("--a=1   --b", ["--a=1", "--b"]),
        ('--a="x y" --b=2', ["--a=x y", "--b=2"]),
        ("--a='x y'", ["--a=x y"]),
        ("\t--a=1\n--b=2 ", ["--a=1", "--b=2"]),
        ('--a="x --b', ['--a="x', "--b"]),  # unbalanced quote: plain whitespace split
    ],
)
def test_split(value: str | None, expected: list[str]) -> None:
    assert flags.split(value) == expected


def test_name_and_value_of() -> None:
    assert flags.name_of("--xla_dump_to=/x=y") == "--xla_dump_to"
    assert flags.value_of("--xla_dump_to=/x=y") == "/x=y"
    assert flags.name_of("--noxla_foo") == "--noxla_foo"
    assert flags.value_of("--noxla_foo") is None


def test_without_dump_flags() -> None:
    given = (
        "--xla_dump_to=/x",
        "--xla_cpu_enable_fast_math=false",
        "--xla_dump_hlo_as_text",
        "--xla_dump_hlo_module_re=f",
        "--xla_disable_hlo_passes=a,b",
    )
    assert flags.without_dump_flags(given) == (
        "--xla_cpu_enable_fast_math=false",
        "--xla_disable_hlo_passes=a,b",
    )


def test_from_debug_options_synthetic() -> None:
    text = "\n".join(
        [
            "xla_cpu_enable_fast_min_max: false",
            'xla_disable_hlo_passes: "algsimp"',
            'xla_disable_hlo_passes: "cse"',
            'xla_dump_to: "/tmp/x"',
            "xla_dump_hlo_as_text: true",
            "xla_detailed_logging: true",
            "xla_enable_dumping: true",
            "xla_gpu_some_map {",
            '  key: "k"',
            '  value: "v"',
            "}",
            "not_an_xla_field: 3",
            "",
        ]
    )
    assert flags.from_debug_options(text) == (
        "--xla_cpu_enable_fast_min_max=false",
        "--xla_disable_hlo_passes=algsimp,cse",
    )


def real_debug_options(program_runs: ProgramRuns) -> tuple[str, tuple[str, ...]]:
    run = program_runs["two_functions"]
    assert run.completed.returncode == 0, run.output[-2000:]
    (path,) = run.dump_dir.glob("module_*.jit_step.debug_options")
    text = path.read_text("utf-8")
    return text, flags.from_debug_options(text)


def test_from_debug_options_on_a_real_dump(program_runs: ProgramRuns) -> None:
    text, found = real_debug_options(program_runs)
    # XLA writes a repeated field once per element...
    assert 'xla_disable_hlo_passes: "algsimp"' in text
    assert 'xla_disable_hlo_passes: "cse"' in text
    assert "xla_dump_to:" in text and "xla_dump_hlo_pass_re:" in text
    # ...and the flag takes them as one comma-separated list.
    assert "--xla_disable_hlo_passes=algsimp,cse" in found
    assert all(f.startswith("--xla_") for f in found)
    assert not [f for f in found if f.startswith("--xla_dump")]
    assert len({flags.name_of(f) for f in found}) == len(found)


def test_flags_from_a_real_dump_are_accepted_by_xla(
    program_runs: ProgramRuns, tmp_path: Path
) -> None:
    _, found = real_debug_options(program_runs)
    env = clean_env(flags.join(found))
    code = "import jax, jax.numpy as jnp; print(jax.jit(lambda x: x * 2)(jnp.ones(3)))"
    done = proc.run([sys.executable, "-c", code], env=env, cwd=tmp_path, timeout=120)
    # An unknown flag makes XLA print its whole flag list and exit non-zero.
    assert done.returncode == 0, done.output[-3000:]
    assert "[2. 2. 2.]" in done.output


@pytest.mark.jax
@pytest.mark.parametrize("given", ["--xla_foo=1", "--xla_foo"])
def test_the_flag_xla_refuses_as_unknown_is_named(given: str, tmp_path: Path) -> None:
    env = clean_env(f"--xla_cpu_enable_fast_math=false {given}")
    code = "import jax, jax.numpy as jnp; print(jax.jit(lambda x: x * 2)(jnp.ones(3)))"
    done = proc.run([sys.executable, "-c", code], env=env, cwd=tmp_path, timeout=120)
    assert done.returncode != 0
    assert flags.unknown_flag(done.output) == "--xla_foo"


def test_no_unknown_flag_in_output_that_names_none() -> None:
    assert flags.unknown_flag("") is None
    assert flags.unknown_flag("XLA_FLAGS=--xla_foo=1\nFatal Python error: Aborted") is None


# What a replay of a stranger's bundle may apply (flags.admit): every vector that names a
# file, in every spelling XLA reads, is withheld; options that only steer compilation stay.
@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("--xla_dump_to=/somewhere", "it is about files"),
        ("-xla_dump_to=/somewhere", "it is about files"),  # XLA reads one dash too
        ("--xla_dump_to=sponge", "it is about files"),  # Bazel's output folder
        ("--xla_dump_hlo_as_text", "it is about files"),  # a format alone dumps to stdout
        ("-xla_dump_hlo_snapshots=true", "it is about files"),
        ("--noxla_dump_hlo_as_proto", "it is about files"),
        ("--xla_enable_dumping=true", "it is about files"),
        ("--xla_gpu_dump_autotune_results_to=/x.txt", "it is about files"),
        ("--xla_gpu_load_autotune_results_from=/x.txt", "it is about files"),
        ("--xla_gpu_per_fusion_autotune_cache_dir=c", "it is about files"),
        ("--xla_gpu_kernel_cache_file=k", "it is about files"),
        ("--xla_gpu_experimental_autotune_cache_mode=UPDATE", "it is about files"),
        ("--xla_gpu_cuda_data_dir=/usr/local/cuda", "it is about files"),
        ("--xla_gpu_ptx_file=a", "it is about files"),
        ("--xla_gpu_llvm_ir_file=a", "it is about files"),
        ("--xla_gpu_target_config_filename=t", "it is about files"),
        ("--xla_gpu_algorithm_denylist_path=d", "it is about files"),
        ("--xla_gpu_pgle_profile_file_or_directory_path=p", "it is about files"),
        ("--xla_gpu_asm_extra_flags=-o", "it is about files"),  # ptxas's own output
        ("--xla_backend_extra_options=a,time-trace-file=t", "it is about files"),  # LLVM's
        ("--xla_backend_extra_options=x=../y", "its value could name a file"),
        ("--xla_mosaic_dump_to=m", "it is about files"),
        ("--xla_dump_hlo_as_url", "it is about files"),
        ("--xla_cpu_max_isa=/x", "its value could name a file"),  # any name, a path value
        ("--xla_foo=..", "its value could name a file"),
        ("--xla_foo=~", "its value could name a file"),
        ("--xla_foo=$HOME", "its value could name a file"),
        ("--xla_foo=a b", "its value could name a file"),
        ("--xla_foo=1\t--xla_dump_to=/x", "its value could name a file"),  # a second flag
        ("--xla_foo='x'", "its value could name a file"),
        ("--xla_foo=C:\\x", "its value could name a file"),
        ("--xla_foo=" + "a" * 1001, "its value could name a file"),
        ("---xla_dump_to=/x", "not an XLA option"),
        ("--XLA_DUMP_TO=/x", "not an XLA option"),
        ("--tf_xla_foo=1", "not an XLA option"),
        ("xla_dump_to", "it is about files"),
    ],
)
def test_admit_withholds_every_option_that_could_name_a_file(flag: str, why: str) -> None:
    admitted = flags.admit([flag])
    assert admitted.flags == ()
    assert admitted.withheld == (f"{flag[:200]} ({why})",)


@pytest.mark.parametrize(
    ("flag", "applied"),
    [
        ("--xla_cpu_enable_fast_math=false", "--xla_cpu_enable_fast_math=false"),
        ("-xla_cpu_enable_fast_math=true", "--xla_cpu_enable_fast_math=true"),
        ("--noxla_cpu_enable_fast_math", "--xla_cpu_enable_fast_math=false"),
        ("--xla_disable_all_hlo_passes", "--xla_disable_all_hlo_passes"),
        ("--xla_disable_hlo_passes=algsimp,cse", "--xla_disable_hlo_passes=algsimp,cse"),
        ("--xla_cpu_experimental_ynn_fusion_type=", "--xla_cpu_experimental_ynn_fusion_type="),
        ("--xla_backend_optimization_level=0", "--xla_backend_optimization_level=0"),
        ("--xla_gpu_memory_limit_slop_factor=95", "--xla_gpu_memory_limit_slop_factor=95"),
        ("--xla_gpu_auto_spmd_partitioning_memory_budget_ratio=1.1",
         "--xla_gpu_auto_spmd_partitioning_memory_budget_ratio=1.1"),
        ("--xla_x=-1e-3", "--xla_x=-1e-3"),
        ("--xla_cpu_max_isa=AVX2", "--xla_cpu_max_isa=AVX2"),
        ("--xla_gpu_enable_command_buffer=FUSION,CUBLAS",
         "--xla_gpu_enable_command_buffer=FUSION,CUBLAS"),
        ("--xla_force_host_platform_device_count=4", "--xla_force_host_platform_device_count=4"),
        ("--xla_backend_extra_options=bogus_opt,x=1", "--xla_backend_extra_options=bogus_opt,x=1"),
    ],
)  # fmt: skip
def test_admit_keeps_options_that_steer_compilation_in_canonical_form(
    flag: str, applied: str
) -> None:
    assert flags.admit([flag]) == flags.Admitted((applied,))
