"""``verify`` on real bundles from ``collect``, and on broken and hostile ones."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.hostile import snapshot
from xla_bugkit.bundle.manifest import load_manifest
from xla_bugkit.cli.main import main
from xla_bugkit.verify import result as verify_result
from xla_bugkit.verify import run as verify_module

pytestmark = pytest.mark.slow  # real jax programs, end to end

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle of a compile error (the quickest real failure to collect and replay)."""
    out = tmp_path_factory.mktemp("verify") / "bug.zip"
    argv = [XLA_BUGKIT, "collect", "-q", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / "compile_error.py")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def read(bundle: Path, name: str) -> bytes:
    with zipfile.ZipFile(bundle) as z:
        return z.read(name)


def rewrite(src: Path, dest: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of the zip ``src`` with members replaced (bytes) or removed (None)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for name in zin.namelist():
            data = change.get(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)
        for name, data in change.items():
            if name not in zin.namelist() and data is not None:
                zout.writestr(name, data)
    return dest


def test_verify_reproduces_the_recorded_failure(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "reproduced: error (as in the reporter's replay)" in out
    assert "the recorded failure reproduces here" in out


def test_verify_replays_in_a_child_started_before_the_bundle_unpacked(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from xla_bugkit import proc
    from xla_bugkit.replay import children

    started: list[str] = []
    start, unpack = children.Spares.start, verify_module.open_bundle

    def spare_started(spares: children.Spares, platform: str) -> None:
        started.append(platform)
        start(spares, platform)

    def unpacking(*args: object, **kwargs: object) -> object:
        assert started == ["cpu"], "the replay child should be importing jax by now"
        return unpack(*args, **kwargs)

    def no_cold_child(*args: object, **kwargs: object) -> proc.Completed:
        raise AssertionError("the module got a child of its own: the spare went unused")

    monkeypatch.setattr(children.Spares, "start", spare_started)
    monkeypatch.setattr(verify_module, "open_bundle", unpacking)
    monkeypatch.setattr(proc, "run_captured", no_cold_child)
    assert main(["verify", str(bundle)]) == 0
    assert "reproduced: error (as in the reporter's replay)" in capsys.readouterr().out


def test_verify_json(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--json", "-q", str(bundle)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reproduced"] is True
    assert result["failure"]["status_code"] == "INTERNAL"
    (module,) = result["modules"]
    assert module["verdict"]["outcome"] == "reproduced: error"
    assert module["same_as_reporter"] is True


def test_installed_command_exit_code(bundle: Path) -> None:
    done = subprocess.run([XLA_BUGKIT, "verify", "-q", str(bundle)], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_tampered_file_is_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with zipfile.ZipFile(bundle) as z:
        name = next(n for n in z.namelist() if n.endswith("before_optimizations.txt"))
    bad = rewrite(bundle, tmp_path / "bad.zip", {name: b"HloModule evil\n"})
    assert main(["verify", str(bad)]) == 4
    err = capsys.readouterr().err
    assert err.strip() == f"xla-bugkit: error: {name} does not match its sha256 in the manifest"


def test_edited_issue_text_verifies_with_a_notice(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ISSUE.md invites edits before filing; log.txt may be trimmed. Neither is refused."""
    issue = read(bundle, "ISSUE.md") + b"\nMore context from the reporter.\n"
    edited = rewrite(bundle, tmp_path / "edited.zip", {"ISSUE.md": issue, "log.txt": b"cut\n"})
    assert main(["verify", str(edited)]) == 0
    captured = capsys.readouterr()
    assert "note: ISSUE.md was edited after the bundle was made\n" in captured.out
    assert "note: log.txt was edited after the bundle was made\n" in captured.out
    assert "xla-bugkit: ISSUE.md was edited after the bundle was made" in captured.err
    assert "the recorded failure reproduces here" in captured.out
    assert main(["verify", "--json", "-q", str(edited)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["integrity"], result["edited"]) == ("ok", ["ISSUE.md", "log.txt"])


def test_repack_reseals_an_edited_issue_text(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    issue = read(bundle, "ISSUE.md").replace(b"### Description", b"### Description\n\nMine.")
    edited = rewrite(bundle, tmp_path / "edited.zip", {"ISSUE.md": issue})
    before = edited.read_bytes()
    resealed = tmp_path / "resealed.tar.gz"
    assert main(["repack", str(edited), str(resealed)]) == 0
    assert "ISSUE.md was edited after the bundle was made" in capsys.readouterr().err
    assert edited.read_bytes() == before  # the user's archive is left as it was
    manifest = load_manifest(resealed)
    entry = next(f for f in manifest["files"] if f["path"] == "ISSUE.md")
    assert entry["sha256"] == hashlib.sha256(issue).hexdigest() and entry["size"] == len(issue)
    assert "ISSUE.md was edited after the bundle was made" in manifest["notes"]
    assert main(["verify", "--json", "-q", str(resealed)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["edited"] == []  # sealed again: it matches its manifest now
    assert main(["show", "--issue", str(resealed)]) == 0
    assert "Mine." in capsys.readouterr().out


@pytest.mark.parametrize("command", ["verify", "repack"])
def test_an_edited_proto_is_still_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with zipfile.ZipFile(bundle) as z:
        name = next(n for n in z.namelist() if n.endswith("before_optimizations.hlo.pb"))
        proto = z.read(name)
    # Edited alongside the issue text, which may not carry it through.
    change = {name: proto[:-1] + bytes([proto[-1] ^ 1]), "ISSUE.md": b"edited\n"}
    bad = rewrite(bundle, tmp_path / "proto.zip", change)
    argv = [command, str(bad)] + ([str(tmp_path / "out.zip")] if command == "repack" else [])
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert err.strip() == f"xla-bugkit: error: {name} does not match its sha256 in the manifest"
    assert not (tmp_path / "out.zip").exists()


def test_a_negative_hang_time_is_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hang's replay waits as long as the recorded time without progress: it must be sane."""
    manifest = json.loads(read(bundle, "manifest.json"))
    manifest["failure"]["stalled_seconds"] = -5
    bad = rewrite(
        bundle, tmp_path / "hostile.zip", {"manifest.json": json.dumps(manifest).encode()}
    )
    assert main(["verify", str(bad)]) == 4
    err = capsys.readouterr().err
    assert "'stalled_seconds' must be a number of seconds or null" in err


def test_unlisted_file_is_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = rewrite(bundle, tmp_path / "extra.zip", {"modules/extra.txt": b"surprise"})
    assert main(["verify", str(bad)]) == 4
    assert "files its manifest does not list" in capsys.readouterr().err


def test_archive_without_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as z:
        z.writestr("notes.txt", "hello")
    assert main(["verify", str(plain)]) == 4
    assert "has no manifest.json: not an xla-bugkit bundle" in capsys.readouterr().err


def test_truncated_bundle(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.zip"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    assert main(["verify", str(cut)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("xla-bugkit: error: ") and "Traceback" not in err


def test_traversal_entry_is_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = rewrite(bundle, tmp_path / "evil.zip", {"../evil.txt": b"x"})
    assert main(["verify", str(evil)]) == 4
    assert not (tmp_path.parent / "evil.txt").exists()
    assert "xla-bugkit: error:" in capsys.readouterr().err


def test_missing_file_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path / "nope.zip")]) == 1
    assert "nope.zip" in capsys.readouterr().err


def test_show_lists_without_extracting(
    bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["show", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "failure: compile error: INTERNAL: Too many extra compilation parts" in out
    assert "module module_0000.jit_train_step: reproduced: error" in out
    assert "manifest.json" in out and "ISSUE.md" in out
    assert list(tmp_path.iterdir()) == []


def test_show_issue_prints_the_issue_text(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--issue", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!--\nSuggested title: XLA CPU compile error")
    assert "### System info (python version, jaxlib version, accelerator, etc.)" in out


def test_untrusted_cpu_replays_get_a_memory_limit() -> None:
    from xla_bugkit.replay.limits import memory_limit

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory_limit("cpu") == ram * 3 // 4
    assert memory_limit("gpu") is None


def test_a_gpu_bundle_on_a_cpu_only_machine_is_unverified_never_not_reproduced(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle recorded on CUDA (its manifest says so; its unoptimized module is what jax
    lowers for any platform) verified where no CUDA plugin is installed."""
    manifest = json.loads(read(bundle, "manifest.json"))
    for module in manifest["modules"]:
        module["platform"] = "gpu"
    manifest["versions"]["jax-cuda12-plugin"] = manifest["versions"]["jax"]
    gpu = rewrite(
        bundle, tmp_path / "gpu bug.zip", {"manifest.json": json.dumps(manifest).encode()}
    )
    assert main(["verify", str(gpu)]) == 6
    out = capsys.readouterr().out
    assert "unverified: needs CUDA, which this machine lacks" in out
    assert "checked: integrity ok" in out
    assert "checked: the module parses (jit_" in out
    # The unoptimized module compiles for the CPU from scratch: the same XLA error there.
    assert "on the CPU: also fails on the CPU, the same way: compile error" in out
    jax_version = manifest["versions"]["jax"]
    assert f"pip install 'jax[cuda12]=={jax_version}' && " in out
    assert "xla-bugkit verify 'gpu bug.zip'" in out
    assert "the recorded failure is unverified here: it needs CUDA" in out
    assert "does NOT reproduce" not in out
    assert main(["verify", "--json", "-q", str(gpu)]) == 6
    result = json.loads(capsys.readouterr().out)
    assert result["unverified"] is True and result["reproduced"] is False
    (module,) = result["modules"]
    assert module["verdict"] is None
    assert module["unverified"]["cpu_verdict"]["outcome"] == "reproduced: error"


def resealed(src: Path, dest: Path, name: str, data: bytes) -> Path:
    """``src`` with ``name`` replaced and its manifest entry made to match: an edit that a
    hostile sender makes whole, which integrity alone cannot catch."""
    manifest = json.loads(read(src, "manifest.json"))
    for entry in manifest["files"]:
        if entry["path"] == name:
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    return rewrite(src, dest, {name: data, "manifest.json": json.dumps(manifest).encode()})


def test_verify_vouches_for_repro_py_only_as_xla_bugkit_writes_it(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--json", str(bundle)]) == 0
    assert json.loads(capsys.readouterr().out)["scripts"] == {"repro.py": "checked"}
    script = read(bundle, "repro.py").decode()
    edits = {
        "code": script.replace("def main() -> int:\n", "def main() -> int:\n    os.remove('x')\n"),
        "a flag": script.replace("FLAGS = [", "FLAGS = ['--xla_dump_to=/tmp/x', ", 1),
    }
    said = {}
    for what, text in edits.items():
        edited = resealed(bundle, tmp_path / f"{what}.zip", "repro.py", text.encode())
        assert main(["verify", str(edited)]) == 0  # the replay does not run it: as before
        out, err = capsys.readouterr()
        said[what] = err
        assert "note: repro.py: read it before you run it: " in out
    assert (
        "repro.py: read it before you run it: it is not the script xla-bugkit writes"
        in (said["code"])
    )
    assert "it would apply --xla_dump_to=/tmp/x (" in said["a flag"]


def test_a_hang_whose_call_ran_on_unrecorded_inputs_is_unverified_not_unreproduced() -> None:
    from xla_bugkit.cli.commands.verify import render_table
    from xla_bugkit.failure.classify import Failure, Kind, Phase
    from xla_bugkit.verdict import Outcome, Verdict

    hung = Failure(
        kind=Kind.HANG,
        phase=Phase.RUN,
        headline="XLA was executing jit(solve); stopped by the user",
        signature="hang",
        stopped_by="user",
        executing="solve",
        unread_inputs=True,
    )
    finished = Verdict("module_0006.jit_solve", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    check = verify_result.ModuleCheck("module_0006.jit_solve", finished, "not reproduced")
    result = verify_result.VerifyResult(Path("b.zip"), hung, (check,))
    assert result.unverified
    table = render_table(result)
    assert table.endswith(
        "the recorded failure is unverified here: the call that hung ran on inputs the "
        "reporter's run could not record, and the replays ran on an earlier call's"
    )
    assert not result.reproduced  # so the command exits 6 (unverified), not 3


def unzipped(bundle: Path, folder: Path) -> Path:
    """``bundle`` unpacked by hand into ``folder``, as a maintainer unzips an attachment."""
    with zipfile.ZipFile(bundle) as z:
        z.extractall(folder)
    return folder


def _same_parts(result: dict) -> dict:  # type: ignore[type-arg]
    """A ``verify --json`` result less what names the bundle itself."""
    modules = [{k: m[k] for k in ("label", "recorded", "same_as_reporter")} | {
        "outcome": m["verdict"]["outcome"], "evidence": m["verdict"]["evidence"]}
        for m in result["modules"]]  # fmt: skip
    return {**{k: v for k, v in result.items() if k != "bundle"}, "modules": modules}


def test_an_unpacked_bundle_verifies_as_its_archive_and_is_left_as_it_was(
    bundle: Path, tmp_path: Path
) -> None:
    folder = unzipped(bundle, tmp_path / "bug")
    before = snapshot(folder)
    results = []
    for target in (bundle, folder):  # the installed command, from a folder of its own
        done = subprocess.run([XLA_BUGKIT, "verify", "--json", "-q", str(target)],
                              capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout))
    assert results[1]["bundle"] == str(folder) and results[1]["integrity"] == "ok"
    assert _same_parts(results[1]) == _same_parts(results[0])
    assert results[1]["modules"][0]["verdict"]["outcome"] == "reproduced: error"
    assert snapshot(folder) == before  # the replays ran elsewhere: nothing written in it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bug"]


def test_an_unpacked_bundle_with_a_link_out_of_it_is_refused(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = unzipped(bundle, tmp_path / "bug")
    (folder / "modules" / "passwd").symlink_to("/etc/passwd")
    assert main(["verify", str(folder)]) == 4
    err = capsys.readouterr().err
    assert err == f"xla-bugkit: error: {folder}: refusing symlink entry 'modules/passwd'\n"


def test_an_unpacked_bundle_with_a_changed_file_fails_its_integrity_check(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = unzipped(bundle, tmp_path / "bug")
    (text,) = folder.glob("modules/*/*.before_optimizations.txt")
    text.write_text("HloModule evil\n")
    assert main(["verify", str(folder)]) == 4
    name = text.relative_to(folder).as_posix()
    err = capsys.readouterr().err
    assert err == f"xla-bugkit: error: {name} does not match its sha256 in the manifest\n"


def test_a_folder_that_is_no_bundle_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("verify the bundle\n")
    assert main(["verify", str(tmp_path / "notes")]) == 4
    err = capsys.readouterr().err
    assert err == (
        f"xla-bugkit: error: {tmp_path / 'notes'} has no manifest.json: not an xla-bugkit bundle\n"
    )
