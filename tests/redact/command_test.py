"""Tests for xla_bugkit.redact's secrets on the command line: the values of secret options,
the note that names them, and a real collect of a program given secrets on its command line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS
from tests.redact.redactor_test import ALICE
from xla_bugkit.redact import REDACTED, SECRET, Redactor, command_note, command_secrets

COMMAND = ["python", "train.py", "--password", "hunter2", "--token", "abc", "--steps", "10"]


@pytest.mark.parametrize(
    ("argv", "secrets"),
    [
        (COMMAND, ("hunter2", "abc")),
        (["x", "--passwd", "pw1", "--secret", "s3", "--auth", "a1"], ("pw1", "s3", "a1")),
        (["x", "--api-key", "k1", "--apikey", "k2", "--API_KEY", "k3"], ("k1", "k2", "k3")),
        (
            ["x", "--credentials", "c1", "--credential", "c2", "--hf-token", "t1"],
            ("c1", "c2", "t1"),
        ),
        (
            ["x", "--secret-key", "s1", "--access_key", "s2", "--auth-token", "s3"],
            ("s1", "s2", "s3"),
        ),
        (["x", "--password=hunter2", "--token='a b'"], ("hunter2", "a b")),
        (["bash", "-c", "python t.py --token abc --steps 3"], ("abc",)),
        # Last words that are not secrets; an option that is followed by an option.
        (["x", "--max-tokens", "128", "--tokenizer", "t5", "--token-file", "f.txt"], ()),
        (["x", "--num-passes", "2", "--bypass", "y", "--auth", "--verbose"], ()),
        (["x", "--token"], ()),
    ],
)
def test_command_secrets(argv: list[str], secrets: tuple[str, ...]) -> None:
    assert command_secrets(argv) == secrets


def test_command_note_names_the_options() -> None:
    note = command_note([*COMMAND, "--api-key=k1", "--token", "again"])
    assert note == "redacted: the command line's values of --password, --token, --api-key"
    assert command_note(["python", "train.py", "--max-tokens", "128"]) is None
    # The note survives the redaction every note goes through.
    assert Redactor(secrets=command_secrets(COMMAND)).text(note) == note


def test_secret_values_leave_every_form_of_the_command_line() -> None:
    r = Redactor(secrets=command_secrets(COMMAND))
    # Each argument alone (the manifest's list), the shell form (ISSUE.md), and a program's
    # own print of sys.argv (the log).
    assert [r.text(a) for a in COMMAND] == [
        *COMMAND[:3],
        REDACTED,
        "--token",
        REDACTED,
        "--steps",
        "10",
    ]
    shell, counts = r.text_with_report(shlex.join(COMMAND))
    assert shell == "python train.py --password <REDACTED> --token <REDACTED> --steps 10"
    assert counts == Counter({SECRET: 2})
    assert r.text(repr(COMMAND[2:6])) == "['--password', '<REDACTED>', '--token', '<REDACTED>']"
    assert r.text("logged in with abc; token=abc") == "logged in with <REDACTED>; token=<REDACTED>"


def test_secret_options_are_found_in_text_without_knowing_the_values() -> None:
    text = "ran: python t.py --hf-token hf123 --db-password 'p w' --secret=s3 --steps 5\n"
    assert ALICE.text(text) == (
        "ran: python t.py --hf-token <REDACTED> --db-password <REDACTED> --secret=<REDACTED> "
        "--steps 5\n"
    )


def test_known_secrets_spare_longer_words_and_plain_values() -> None:
    r = Redactor(secrets=command_secrets(["x", "--token", "abc", "--auth", "off", "--pw", "1"]))
    assert r.text("abcdef xabc abc_1 abc.") == "abcdef xabc abc_1 <REDACTED>."
    # "off" is too plain a word to hunt for everywhere: only where it is the value.
    assert r.text("turn it off") == "turn it off"
    assert r.text("off") == REDACTED  # an argument of its own
    main = Redactor(secrets=["main"])
    assert main.text("func.func public @main(") == "func.func public @main("
    assert (
        r.text("f32[4] %token.1 = token[] after-all()") == "f32[4] %token.1 = token[] after-all()"
    )


def test_known_secrets_never_show_in_repr_and_are_found_in_binaries() -> None:
    r = Redactor(secrets=["hunter2"])
    assert "hunter2" not in repr(r)
    assert r.find_in_bytes(b"\x00\x12hunter2\xff") == ["hunt…"]


def test_for_this_machine_takes_the_commands_secrets() -> None:
    r = Redactor.for_this_machine(COMMAND)
    assert r.secrets == ("hunter2", "abc")
    assert r.text("hunter2") == REDACTED


@pytest.mark.slow  # a real jax program, collected end to end
def test_collect_keeps_command_line_secrets_out_of_every_file(tmp_path: Path) -> None:
    out = tmp_path / "bug.zip"
    # Not "abc": the manifest lists sha256 digests in hex, and one often holds "abc"; nor any
    # three letters, which a binary file of the bundle holds by chance now and then.
    secrets = ["--password", "hunter2", "--token", "zq9-tok"]
    xla_bugkit = str(Path(sys.executable).with_name("xla-bugkit"))
    argv = [xla_bugkit, "collect", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / "logs_its_args.py"), *secrets]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        files = {name: z.read(name) for name in z.namelist()}
    assert {"ISSUE.md", "manifest.json", "log.txt", "environment.txt"} <= files.keys()
    for name, data in files.items():
        assert b"hunter2" not in data, name
        assert b"zq9-tok" not in data, name
    manifest = json.loads(files["manifest.json"])
    assert manifest["command"][-4:] == ["--password", REDACTED, "--token", REDACTED]
    assert "--password <REDACTED> --token <REDACTED>" in files["ISSUE.md"].decode()
    assert "'--password', '<REDACTED>', '--token', '<REDACTED>'" in files["log.txt"].decode()
    # The summary lists what was redacted: the options, and the secrets the log printed.
    note = "redacted: the command line's values of --password, --token"
    assert note in manifest["notes"] and f"  {note}\n" in done.stderr
    assert any(n.startswith("redacted: ") and "4 secrets" in n for n in manifest["notes"])


def test_a_work_dir_outside_home_is_redacted_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home" / "alice", tmp_path / "scratch" / "run1"
    monkeypatch.setenv("HOME", str(home))
    dumped = f'xla_dump_to: "{work}/dump"'
    redactor = Redactor.for_this_machine(private=[work])
    assert redactor.text(dumped) == 'xla_dump_to: "~/dump"'
    # Under the home, the home rule keeps the rest of the path readable.
    inside = home / ".cache" / "run2"
    redactor = Redactor.for_this_machine(private=[inside])
    assert redactor.text(f"{inside}/dump") == "~/.cache/run2/dump"


def test_the_work_dir_is_redacted_but_not_counted_as_the_users_home_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # collect's own work dir (in the user cache, under the home) is in what XLA dumps; it is
    # written as ~ like any home path, but the summary's "redacted: N home paths" is about
    # the user's own paths, such as the program's.
    home = tmp_path / "home" / "alice"
    work = home / ".cache" / "xla-bugkit" / "runs" / "r1"
    monkeypatch.setenv("HOME", str(home))
    redactor = Redactor.for_this_machine(private=[work])
    text = f'xla_dump_to: "{work}/dump"\nDumping to {work}/dump/m.txt\nFile "{home}/proj/train.py"'
    redacted, counts = redactor.text_with_report(text)
    assert str(home) not in redacted and "~/.cache/xla-bugkit/runs/r1/dump" in redacted
    assert counts == {"home path": 1}
    # Outside the home, the work dir is still written as ~, and still not counted.
    outside = tmp_path / "scratch" / "run1"
    redactor = Redactor.for_this_machine(private=[outside])
    redacted, counts = redactor.text_with_report(f"{outside}/dump/m.txt")
    assert redacted == "~/dump/m.txt" and not counts
