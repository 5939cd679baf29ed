"""The run's LIBTPU_INIT_ARGS, the TPU compiler's own flags: recorded in the manifest, named in
ISSUE.md, applied by a replay, verify and repro.py on a TPU, those that name or write files
withheld. ``recorded/tpu_flag_vmem.zip`` was written on a TPU v5e chip by
``benchmarks/tpu/programs/tpu_flag_vmem.py``, whose Pallas kernel fails only under the flag
``--xla_tpu_scoped_vmem_limit_kib=4096`` (run with ``--xla_mosaic_dump_to=DIR`` too);
benchmarks/TPU.md says what verify and repro.py did with it there."""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.programs import run_collect
from xla_bugkit.bundle import report, script_check
from xla_bugkit.bundle.manifest import loader
from xla_bugkit.cli.main import main
from xla_bugkit.errors import BadBundleError, ExitCode
from xla_bugkit.hlo import flags
from xla_bugkit.replay import ReplayInput, RunContext, replay_input, spawn
from xla_bugkit.replay.children import child_env
from xla_bugkit.verdict import Outcome

RECORDED = Path(__file__).parent / "recorded"
BUNDLE = RECORDED / "tpu_flag_vmem.zip"
FLAG = "--xla_tpu_scoped_vmem_limit_kib=4096"
DUMP = "--xla_mosaic_dump_to=/tmp/tpu-visit/own-mosaic"
WITHHELD = f"LIBTPU_INIT_ARGS {DUMP} (it is about files)"


def _member(name: str, bundle: Path = BUNDLE) -> str:
    with zipfile.ZipFile(bundle) as z:
        return z.read(name).decode()


def _manifest(bundle: Path = BUNDLE) -> dict:  # type: ignore[type-arg]
    return json.loads(_member("manifest.json", bundle))  # type: ignore[no-any-return]


def test_the_manifest_records_the_runs_tpu_flags() -> None:
    m = _manifest()
    assert m["libtpu_init_args"] == [FLAG, DUMP]
    assert m["xla_flags"] == []  # they are not XLA_FLAGS
    (module,) = m["modules"]
    assert module["replay"]["outcome"] == Outcome.REPRODUCED_ERROR
    assert "E1001: CompileTimeScopedVmemOom" in module["replay"]["evidence"]
    assert WITHHELD in module["replay"]["withheld"]


def test_issue_md_names_them_and_what_is_left_out() -> None:
    text = _member("ISSUE.md")
    assert (
        f"**TPU compiler flags:** the run set `LIBTPU_INIT_ARGS` to `{FLAG} {DUMP}`, and the "
        "failure may need them: `repro.py` and `xla-bugkit verify` set them on a TPU"
    ) in text


def test_repro_py_sets_the_admitted_ones_and_passes_its_check() -> None:
    script = _member("repro.py")
    assert f"TPU_ARGS = {[FLAG]!r}\n" in script
    assert script_check.check(script) is None


@pytest.mark.parametrize(
    "value",
    [
        [DUMP],
        ["--xla_jf_dump_to=/home/me"],
        ["--xla_tpu_x=1\nimport os"],
        ["--xla_tpu_x=$(touch /tmp/p)"],
        ["--xla_tpu_x=a'; rm -rf ~ #"],
        ["--xla_tpu_x=" + "1" * 5000],
        ["--xla_tpu_x=1"] * (flags.MAX_TPU_ARGS + 1),
    ],
)
def test_an_edited_tpu_args_setting_fails_the_check(value: list[str]) -> None:
    script = _member("repro.py").replace(f"TPU_ARGS = {[FLAG]!r}\n", f"TPU_ARGS = {value!r}\n")
    assert script_check.check(script) == "it would apply " + (flags.admit_tpu(value).withheld[0])


def test_a_tpu_args_line_that_is_no_plain_list_fails_the_check() -> None:
    script = _member("repro.py").replace(
        f"TPU_ARGS = {[FLAG]!r}\n", "TPU_ARGS = __import__('os').getcwd()\n"
    )
    assert script_check.check(script) == "its TPU_ARGS setting is not a plain value"


def _replayed(tmp_path: Path, manifest: dict) -> ReplayInput:  # type: ignore[type-arg]
    with zipfile.ZipFile(BUNDLE) as z:
        z.extractall(tmp_path)
    (module,) = manifest["modules"]
    files = {role: tmp_path / path for role, path in module["files"].items()}
    found = replay_input(module["label"], files, module["platform"])
    assert found is not None
    return RunContext.of_manifest(manifest).input(found)


def test_a_replay_on_the_tpu_gets_them_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_of_the_maintainer=1")
    inp = _replayed(tmp_path, _manifest())
    assert inp.platform == "tpu" and inp.tpu_args == (FLAG, DUMP)
    admitted = spawn.admitted_tpu_args(inp)
    assert admitted.flags == (FLAG,) and admitted.withheld == (WITHHELD,)
    env = child_env((), inp.platform, tpu_args=admitted.flags)
    assert env["LIBTPU_INIT_ARGS"] == FLAG  # the run's, not this machine's


def test_a_bundle_without_them_leaves_the_machines_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle written before the field, or by a run that set none, loads and replays as it
    did: the verifying machine's own LIBTPU_INIT_ARGS stand."""
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_of_the_maintainer=1")
    older = loader.validate(_manifest(RECORDED / "readme_example.zip"))
    assert "libtpu_init_args" not in older
    assert RunContext.of_manifest(older).tpu_args is None
    manifest = _manifest()
    del manifest["libtpu_init_args"]
    inp = _replayed(tmp_path, manifest)
    assert inp.tpu_args is None
    assert spawn.admitted_tpu_args(inp) == flags.Admitted(())
    assert child_env((), "tpu")["LIBTPU_INIT_ARGS"] == "--xla_tpu_of_the_maintainer=1"


def test_a_run_that_set_none_replays_with_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """collect's own replays: the run's flags, none, in place of this machine's."""
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_x=1")
    inp = RunContext(tpu_args=()).input(ReplayInput("jit_f", Path("m.pb"), platform="tpu"))
    assert inp.tpu_args == ()
    assert (
        child_env((), "tpu", tpu_args=spawn.admitted_tpu_args(inp).flags)["LIBTPU_INIT_ARGS"] == ""
    )


def test_no_replay_elsewhere_applies_or_withholds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_of_this_machine=1")
    inp = ReplayInput("jit_f", Path("m.hlo.pb"), platform="cpu", tpu_args=(FLAG, DUMP))
    assert spawn.admitted_tpu_args(inp) == flags.Admitted(())
    env = child_env((), "cpu", tpu_args=(FLAG,))
    assert env["LIBTPU_INIT_ARGS"] == "--xla_tpu_of_this_machine=1"  # left as it was


@pytest.mark.parametrize("bad", ["--xla_tpu_x=1", [1, 2], {"a": "b"}, None])
def test_a_manifest_whose_tpu_flags_are_not_strings_is_refused(bad: object) -> None:
    manifest = _manifest()
    manifest["libtpu_init_args"] = bad
    with pytest.raises(BadBundleError, match="'libtpu_init_args' must be a list of strings"):
        loader.validate(manifest)


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("--xla_jf_dump_to=/tmp/jf", "it is about files"),
        ("-xla_mosaic_dump_to=/tmp/m", "it is about files"),
        ("--xla_tpu_dump_dir=x", "it is about files"),
        ("--xla_tpu_profile_file=x", "it is about files"),
        ("--xla_tpu_x=/etc/passwd", "its value could name a file"),
        ("--xla_tpu_x=1\n--xla_jf_dump_to=/x", "its value could name a file"),
        ("--xla_tpu_x=`id`", "its value could name a file"),
        ("--xla_tpu_x=" + "9" * 2000, "its value could name a file"),
        ("--megascale_port=1", "not an XLA option"),
    ],
)
def test_a_tpu_flag_that_could_touch_a_file_is_withheld(flag: str, why: str) -> None:
    admitted = flags.admit_tpu([FLAG, flag])
    assert admitted.flags == (FLAG,)
    (said,) = admitted.withheld
    assert said.startswith("LIBTPU_INIT_ARGS ") and said.endswith(f"({why})")
    assert len(said) < 300  # a huge value is not repeated whole


def test_more_flags_than_any_run_sets_are_all_withheld() -> None:
    many = [f"--xla_tpu_x{i}=1" for i in range(flags.MAX_TPU_ARGS + 1)]
    assert flags.admit_tpu(many) == flags.Admitted(
        (), (f"LIBTPU_INIT_ARGS: all {len(many)} flags (over {flags.MAX_TPU_ARGS})",)
    )
    assert flags.admit_tpu(many[:-1]).flags == tuple(many[:-1])


def test_issue_md_shows_a_hostile_value_as_one_code_span() -> None:
    said = report._tpu_args_text(["--xla_tpu_x=`a`|b\n## Heading <b>", "@someone", "x" * 900])
    assert "\n" not in said
    shown = said.split(" to ", 1)[1].split(", and the failure", 1)[0]
    # One span, opened and closed by a run of backticks longer than any inside it.
    assert shown.startswith("``--xla_tpu_x='`a`\\|b ## Heading <b>' @someone xxx")
    assert shown.endswith("...``") and len(shown) < 420
    assert "@<!-- -->someone" in said and "&lt;b&gt;" in said  # the withheld list: plain text


def test_the_repro_templates_own_setting_of_libtpu_init_args() -> None:
    """repro.py's function, run here: the recorded flags first, the user's own win."""
    script = _member("repro.py")
    source = script[script.index("def libtpu_init_args") : script.index("os.environ.setdefault")]
    for env, expected in [
        ({}, FLAG),
        ({"LIBTPU_INIT_ARGS": "--xla_tpu_other=1"}, f"{FLAG} --xla_tpu_other=1"),
        (
            {"LIBTPU_INIT_ARGS": "--xla_tpu_scoped_vmem_limit_kib=16384"},
            "--xla_tpu_scoped_vmem_limit_kib=16384",
        ),
    ]:
        os = SimpleNamespace(environ=env)  # what the function reads of os
        namespace = {"TPU_ARGS": ast.literal_eval(f"[{FLAG!r}]"), "re": re, "os": os}
        exec(source, namespace)  # the bundle's own function, run as written
        assert namespace["libtpu_init_args"]() == expected


@pytest.mark.jax
def test_verify_without_a_tpu_says_it_needs_one(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--timeout", "120", str(BUNDLE)])
    out = capsys.readouterr().out
    assert code == ExitCode.UNVERIFIED, out
    assert "unverified: needs a TPU, which this machine lacks" in out


@pytest.mark.jax
def test_a_cpu_run_records_them_and_its_replay_leaves_them_alone(tmp_path: Path) -> None:
    """A real collect on the CPU with LIBTPU_INIT_ARGS set: recorded (redacted) and named,
    and neither applied nor withheld by the CPU's replay, which no TPU compiler reads."""
    home_dump = f"--xla_jf_dump_to={Path.home()}/jf"
    program = Path(__file__).parents[1] / "programs" / "compile_crash.py"
    done = run_collect(
        tmp_path / "b.zip",
        [sys.executable, str(program)],
        env={"LIBTPU_INIT_ARGS": f"{FLAG} {home_dump}"},
    )
    manifest = done.manifest()
    recorded = manifest["libtpu_init_args"]
    assert len(recorded) == 2, recorded  # collect's own Mosaic dump flag is not the run's
    assert recorded[0] == FLAG and recorded[1].startswith("--xla_jf_dump_to=")
    assert str(Path.home()) not in json.dumps(manifest)  # redacted like the other settings
    assert "**TPU compiler flags:** the run set `LIBTPU_INIT_ARGS` to" in done.text("ISSUE.md")
    replays = [m["replay"] for m in manifest["modules"] if m["replay"]]
    assert replays and all(m["outcome"].startswith("reproduced") for m in replays[:1])
    assert not any("LIBTPU" in w for r in replays for w in r.get("withheld", ()))
    assert "\nTPU_ARGS = []\n" in done.text("repro.py")


@pytest.mark.jax
def test_flags_the_program_sets_itself_are_recorded_without_collects_own(tmp_path: Path) -> None:
    """As TPU scripts often do, the program adds to LIBTPU_INIT_ARGS before importing jax; the
    record is what its backend started with, less collect's own Mosaic dump flag."""
    program = Path(__file__).parents[1] / "programs" / "compile_crash.py"
    code = (
        "import os, runpy\n"
        "os.environ['LIBTPU_INIT_ARGS'] += ' --xla_tpu_set_by_program=true'\n"
        f"runpy.run_path({str(program)!r}, run_name='__main__')\n"
    )
    done = run_collect(
        tmp_path / "b.zip", [sys.executable, "-c", code], env={"LIBTPU_INIT_ARGS": FLAG}
    )
    recorded = done.manifest()["libtpu_init_args"]
    assert recorded == [FLAG, "--xla_tpu_set_by_program=true"], done.stderr
