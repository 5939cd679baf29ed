"""Tests for xla_bugkit.redact's Redactor: home paths, user and host names, secrets in text,
the environment, binary scans and same-length copies, and the summary."""

from __future__ import annotations

import getpass
import socket
from collections import Counter
from pathlib import Path

import pytest

from xla_bugkit.redact import (
    HOME_PATH,
    HOST_NAME,
    SECRET,
    USER_NAME,
    Redactor,
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


def test_a_count_or_a_truth_value_is_not_a_secret() -> None:
    """A jaxpr's sort has "num_keys=1": a setting, which a secret-looking name does not make
    a secret (it was redacted to "num_keys=<REDACTED> bb", eating the bracket)."""
    jaxpr = "bc:f32[6144] = sort[dimension=0 is_stable=True num_keys=1] bb"
    assert ALICE.text(jaxpr) == jaxpr
    for setting in ("sort_keys=True", "max_tokens=4096 next", "f(num_keys=2, x)"):
        assert ALICE.text(setting) == setting
    for secret in ("TOKEN=12345678901", "API_KEY=1abc", "PASSWORD=hunter2"):
        assert ALICE.text(secret).endswith("=<REDACTED>"), secret


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


def test_copy_binary_of_unknown_layout_is_byte_for_byte_and_says_what_is_left(
    tmp_path: Path,
) -> None:
    # No schema says which bytes are text: nothing is rewritten, what is there is reported.
    blob = b"\x0a\x1b/home/alice/proj/m.py\x00\xff/home/alice2/e"
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(blob)
    copied = ALICE.copy_binary(src, dst)
    assert dst.read_bytes() == blob
    assert copied.counts == Counter() and copied.left == (HOME_PATH,)
    assert Redactor(user="bob").copy_binary(src, dst).left == ()


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
