"""Tests for xla_bugkit.redact: home paths, names, secrets (the command line's too),
environment, binary scans; and a real collect of a program given secrets on its command line."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import socket
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from conftest import PROGRAMS

from xla_bugkit.redact import (
    HOME_PATH,
    HOST_NAME,
    REDACTED,
    SECRET,
    USER_NAME,
    Redactor,
    command_note,
    command_secrets,
    is_reportable_env_name,
    summarize,
)

ALICE = Redactor(
    home=["/home/alice", "/mnt/nfs/home/alice"],
    user="alice",
    host=["alice-box.corp.example.com", "alice-box"],
)
GHP = "ghp_" + "A1b2C3d4E5" * 4


def test_hlo_metadata_path_becomes_tilde() -> None:
    hlo = 'metadata={op_name="jit(f)/add" source_file="/home/alice/proj/train.py" source_line=7}'
    out, counts = ALICE.text_with_report(hlo)
    assert 'source_file="~/proj/train.py"' in out
    assert counts == Counter({HOME_PATH: 1})


def test_longest_home_first_and_resolved_home() -> None:
    out = ALICE.text("/mnt/nfs/home/alice/a.py and /home/alice/b.py")
    assert out == "~/a.py and ~/b.py"


def test_home_does_not_eat_a_longer_name() -> None:
    # "/home/alice2" is someone else's home; "alice2" is not the user name either.
    assert ALICE.text("/home/alice2/x /home/alice.bak") == "/home/alice2/x /home/alice.bak"
    assert ALICE.text("cannot open /home/alice.") == "cannot open ~."


def test_user_and_fqdn_host() -> None:
    out, counts = ALICE.text_with_report("alice@alice-box.corp.example.com:~$ ls; ssh alice-box")
    assert out == "<USER>@<HOST>:~$ ls; ssh <HOST>"
    assert counts == Counter({USER_NAME: 1, HOST_NAME: 2})


def test_short_user_names_do_not_mangle_words() -> None:
    r = Redactor(home="/root", user=["root", "jax", "a"], host="jax")
    text = "import jax; jax_root=/root/x /mnt/root/y site-packages/jax/_src a b"
    assert r.text(text) == "import jax; jax_root=~/x /mnt/root/y site-packages/jax/_src a b"


def test_short_user_names_replaced_in_telling_contexts() -> None:
    r = Redactor(user="bob", host="gpu7")
    assert r.text("bob@gpu7:/home/bob/proj$") == "<USER>@<HOST>:/home/<USER>/proj$"
    assert r.text("USER=bob LOGNAME=bob bobby") == "USER=<USER> LOGNAME=<USER> bobby"
    assert r.text("uname_result(node='gpu7')") == "uname_result(node='<HOST>')"


def test_trivial_hosts_and_system_homes_are_ignored() -> None:
    r = Redactor(home=["/", "/tmp"], host=["localhost", "(none)"])
    assert r.home == () and r.host == ()
    assert r.text("/tmp/x on localhost") == "/tmp/x on localhost"


@pytest.mark.parametrize(
    "secret",
    [
        GHP,
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "hf_" + "abcdefghij" * 3 + "abcd",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-proj-" + "x1" * 20,
        "glpat-" + "a" * 20,
    ],
)
def test_tokens_in_free_text(secret: str) -> None:
    out, counts = ALICE.text_with_report(f"login with {secret} now")
    assert out == "login with <REDACTED> now"
    assert counts == Counter({SECRET: 1})


def test_secret_assignments_json_bearer_and_url_credentials() -> None:
    text = (
        "export WANDB_API_KEY=abc123 DB_PASSWORD='p w' x=1\n"
        '{"auth_token": "t0k", "name": "ok"}\n'
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123\n"
        "git clone https://alice:hunter2@example.com/repo.git\n"
    )
    out = ALICE.text(text)
    for leaked in ("abc123", "p w", "t0k", "abcdefghijklmnopqrstuvwxyz0123", "hunter2"):
        assert leaked not in out
    assert "WANDB_API_KEY=<REDACTED>" in out and "x=1" in out and '"name": "ok"' in out
    assert "https://<REDACTED>@example.com" in out


def test_hlo_token_type_is_not_a_secret() -> None:
    hlo = "%token.1 = token[] after-all(), sharding={replicated}"
    assert ALICE.text(hlo) == hlo


def test_env_keeps_allowlist_drops_secrets_and_redacts_values() -> None:
    environ = {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_dump_to=/home/alice/dumps",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "LIBTPU_INIT_ARGS": "--xla_tpu_x=1",
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "4",
        "JAX_API_TOKEN": "s3cr3t-1",
        "XLA_PRIVATE_THING": "s3cr3t-2",
        "TF_VAR_password": "s3cr3t-3",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-4",
        "HOME": "/home/alice",
        "PATH": "/usr/bin",
        "TF_CLI_CONFIG_FILE": "/home/alice/.terraformrc",
    }
    out = ALICE.env(environ)
    assert out == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "JAX_PLATFORMS": "cpu",
        "LIBTPU_INIT_ARGS": "--xla_tpu_x=1",
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "4",
        "XLA_FLAGS": "--xla_dump_to=~/dumps",
    }
    assert "s3cr3t" not in repr(out)


@pytest.mark.parametrize(
    "name", ["JAX_API_TOKEN", "xla_session_id", "JAX_COOKIE", "TPU_CREDENTIALS", "NCCL_AUTH_X"]
)
def test_secret_looking_names_are_never_reportable(name: str) -> None:
    assert not is_reportable_env_name(name)


def test_find_in_bytes_reports_without_rewriting() -> None:
    blob = b"\x0a\x12" + b"/home/alice/proj/m.py" + b"\x00\xffalice-box\x01" + GHP.encode()
    found = ALICE.find_in_bytes(blob)
    # The user name inside the home path counts once, as the home path.
    assert found == ["/home/alice", "alice-box", "ghp_…"]
    assert ALICE.find_in_bytes(b"\x00\x01 nothing here") == []


def test_find_in_bytes_non_ascii_home() -> None:
    r = Redactor(home="/home/zoë", user="zoë")
    assert r.find_in_bytes("\x00/home/zoë/x\x00".encode()) == ["/home/zoë"]


def test_text_bytes_keeps_undecodable_bytes() -> None:
    assert ALICE.text_bytes(b"\xff /home/alice/x") == b"\xff ~/x"


def test_summarize() -> None:
    counts = Counter({HOME_PATH: 3, HOST_NAME: 1, SECRET: 1})
    assert summarize(counts) == "3 home paths, 1 host name, 1 secret"
    assert summarize(Counter()) == ""


def test_for_this_machine_redacts_this_home_and_names() -> None:
    r = Redactor.for_this_machine()
    home = str(Path.home())
    if home not in ("/", "/tmp"):
        assert r.text(f'source_file="{home}/proj/x.py"') == 'source_file="~/proj/x.py"'
    assert getpass.getuser() in r.user
    host = socket.gethostname()
    if host and host != "localhost":
        assert host in r.host


# --- secrets on the command line -----------------------------------------------------------

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
    secrets = ["--password", "hunter2", "--token", "abc"]
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
        assert b"abc" not in data, name
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
