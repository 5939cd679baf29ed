"""Tests for xla_bugkit.redact's secrets found by structure: a corpus of the forms secrets take
in logs, configs, code and command lines, each taken out with its surroundings kept; the
look-alikes that must stay; the values of the environment's secret variables."""

from __future__ import annotations

from collections import Counter

import pytest

from xla_bugkit.redact import REDACTED, SECRET, Redactor
from xla_bugkit.redact.environ import env_secrets
from xla_bugkit.redact.rules import Rule

R = Redactor(home="/home/alice", user="alice", host="alice-box")
X = REDACTED

# (text, the secret in it, what the text must become). Every secret is unknown to R: each
# is found by the form it is written in, or by its own shape.
CORPUS = [
    # A Python dict's repr, JSON, and their mixes.
    ("{'password': 'hunter2x'}", "hunter2x", f"{{'password': '{X}'}}"),
    (
        "cfg={'db': {'passwd': 'pw-9x'}, 'steps': 10}",
        "pw-9x",
        f"cfg={{'db': {{'passwd': '{X}'}}, 'steps': 10}}",
    ),
    ("{'api_key': 12345678, 'lr': 0.1}", "12345678", f"{{'api_key': {X}, 'lr': 0.1}}"),
    (
        '{"auth_token": "t0k3n-abc", "name": "ok"}',
        "t0k3n-abc",
        f'{{"auth_token": "{X}", "name": "ok"}}',
    ),
    ("{'client_secret': \"it's-9z\"}", "it's-9z", f"{{'client_secret': \"{X}\"}}"),
    (
        '{"Api-Key" :  "k-77aa", "tokens": 3}',
        "k-77aa",
        f'{{"Api-Key" :  "{X}", "tokens": 3}}',
    ),
    (
        "{'session_id': 'zz99qq', 'tokenizer': 't5'}",
        "zz99qq",
        f"{{'session_id': '{X}', 'tokenizer': 't5'}}",
    ),
    # camelCase names, as JavaScript and many JSON APIs write them.
    (
        '{"apiKey": "k-abc123", "userId": 5, "maxTokens": 9}',
        "k-abc123",
        f'{{"apiKey": "{X}", "userId": 5, "maxTokens": 9}}',
    ),
    (
        "{'secretAccessKey': 'x/y+z0', 'region': 'r'}",
        "x/y+z0",
        f"{{'secretAccessKey': '{X}', 'region': 'r'}}",
    ),
    ("accessToken: tok-77q\ndbPass: pw-66q", "tok-77q", f"accessToken: {X}\ndbPass: {X}"),
    # YAML.
    ("password: hunter2y", "hunter2y", f"password: {X}"),
    ('token: "ya-tok-123"', "ya-tok-123", f'token: "{X}"'),
    (
        "db:\n  host: db.example.com\n  password: 'pa55w0rd'\n",
        "pa55w0rd",
        f"db:\n  host: db.example.com\n  password: '{X}'\n",
    ),
    ("- secret: abc123xyz\n- name: run", "abc123xyz", f"- secret: {X}\n- name: run"),
    ("wandb:\n  api_key: 0123abcd4567", "0123abcd4567", f"wandb:\n  api_key: {X}"),
    # INI (~/.aws/credentials, .pypirc) and Python assignments.
    (
        "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = x",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"[default]\naws_secret_access_key = {X}\nregion = x",
    ),
    (
        "[pypi]\nusername = me\npassword = s3cr3t-pw",
        "s3cr3t-pw",
        f"[pypi]\nusername = me\npassword = {X}",
    ),
    ('DB_PASSWORD = "hunter2z"  # keep', "hunter2z", f'DB_PASSWORD = "{X}"  # keep'),
    # Shell and .env files.
    ("export SECRET=s3cr3tv4l && run", "s3cr3tv4l", f"export SECRET={X} && run"),
    ('export HF_TOKEN="hf abc def"', "hf abc def", f"export HF_TOKEN={X}"),
    ('KEY="v4lu3-xyz"\nDEBUG=1', "v4lu3-xyz", f"KEY={X}\nDEBUG=1"),
    ("DB_PASS=pa55word MYSQL_PWD=pa66word", "pa55word", f"DB_PASS={X} MYSQL_PWD={X}"),
    # HTTP.
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", f"Authorization: Basic {X}"),
    ("authorization: Bearer abc.def", "abc.def", f"authorization: Bearer {X}"),
    (
        'curl -H "X-Api-Key: k3y-v4lu3" https://x',
        "k3y-v4lu3",
        f'curl -H "X-Api-Key: {X}" https://x',
    ),
    (
        "curl -H 'Cookie: sessionid=abc123; theme=dark'",
        "abc123",
        f"curl -H 'Cookie: sessionid={X}; theme=dark'",
    ),
    (
        "GET / Bearer abcdefghijklmnopqrstuvwxyz0123",
        "abcdefghijklmnopqrstuvwxyz0123",
        f"GET / Bearer {X}",
    ),
    # URLs.
    (
        "postgres://admin:pa55@db.example.com:5432/prod",
        "pa55",
        f"postgres://{X}@db.example.com:5432/prod",
    ),
    ("redis://:pa55w0rd@cache:6379/0", "pa55w0rd", f"redis://{X}@cache:6379/0"),
    (
        "https://api.example.com/v1?token=abc123&page=2",
        "abc123",
        f"https://api.example.com/v1?token={X}&page=2",
    ),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=0f1e2d3c4b5a&x=1",
        "0f1e2d3c4b5a",
        f"https://b.s3.amazonaws.com/k?X-Amz-Signature={X}&x=1",
    ),
    (
        "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=AbC%2Bd3F&se=x",
        "AbC%2Bd3F",
        f"https://a.blob.core.windows.net/c?sv=2022-11-02&sig={X}&se=x",
    ),
    # Command lines: the shell form, and Python's repr of sys.argv.
    ("python t.py --key abc123 --steps 3", "abc123", f"python t.py --key {X} --steps 3"),
    ("run --db-pass pw99x --num-passes 2", "pw99x", f"run --db-pass {X} --num-passes 2"),
    ("run -password pw88x -v", "pw88x", f"run -password {X} -v"),
    ("argv: ['t.py', '--api-key', 'k1x9']", "k1x9", f"argv: ['t.py', '--api-key', '{X}']"),
    (
        "t.py --auth-token=tk-5 --passphrase 'a b c'",
        "a b c",
        f"t.py --auth-token={X} --passphrase {X}",
    ),
    # A log line.
    ("INFO: using token: tok-99zz for upload", "tok-99zz", f"INFO: using token: {X} for upload"),
    # Private keys.
    (
        "k:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nok",
        "MIIEpAIBAAKCAQEA",
        f"k:\n{X}\nok",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXk",
        X,
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBF",
        X,
    ),
    # Well-known token shapes, anywhere.
    ("key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE", f"key {X} used"),
    ("gh: ghp_" + "A1b2C3d4E5" * 4, "ghp_" + "A1b2C3d4E5" * 4, f"gh: {X}"),
    (
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        f"pat {X}",
    ),
    ("slack xoxb-1234567890-abcdefghij done", "xoxb-1234567890-abcdefghij", f"slack {X} done"),
    (
        "hook https://hooks.slack.com/services/T000/B000/XXXXyyyy end",
        "T000/B000/XXXXyyyy",
        f"hook {X} end",
    ),
    ("hf hf_" + "abcdefghij" * 3 + " x", "hf_" + "abcdefghij" * 3, f"hf {X} x"),
    ("openai sk-proj-" + "x1" * 20, "sk-proj-" + "x1" * 20, f"openai {X}"),
    ("anthropic sk-ant-api03-" + "Zz9" * 10, "sk-ant-api03-" + "Zz9" * 10, f"anthropic {X}"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        f"jwt {X}",
    ),
    ("gcp AIzaSyA-" + "b" * 27 + "1234", "AIzaSyA-" + "b" * 27 + "1234", f"gcp {X}"),
    (
        "stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        f"stripe {X}",
    ),
    ("npm npm_" + "a1B2" * 9, "npm_" + "a1B2" * 9, f"npm {X}"),
    ("pypi pypi-AgEIcHlwaS5vcmc" + "Q" * 40, "pypi-AgEIcHlwaS5vcmc" + "Q" * 40, f"pypi {X}"),
    ("gitlab glpat-" + "a" * 20, "glpat-" + "a" * 20, f"gitlab {X}"),
    ("gcloud ya29." + "f" * 24, "ya29." + "f" * 24, f"gcloud {X}"),
    ("dbx dapi" + "0123456789abcdef" * 2, "dapi" + "0123456789abcdef" * 2, f"dbx {X}"),
]


@pytest.mark.parametrize(("text", "secret", "expected"), CORPUS)
def test_each_form_loses_its_secret_and_keeps_the_rest(
    text: str, secret: str, expected: str
) -> None:
    out, counts = R.text_with_report(text)
    assert secret not in out
    assert out == expected
    assert counts[SECRET] == expected.count(X) and set(counts) == {SECRET}


def test_the_corpus_is_at_least_thirty_forms() -> None:
    assert len(CORPUS) >= 30


# Look-alikes that are no secret: code, HLO, MLIR, XLA's flags and logs, JAX's keys.
KEPT = [
    "key = jax.random.PRNGKey(0)",
    "key, subkey = jax.random.split(key)",
    "python train.py --max-tokens 128 --tokenizer t5 --token-file f.txt --key-dim 64",
    "tokenizer: t5",
    '{"tokenizer": "t5", "maxTokens": 128, "keyDim": 64, "bypass": "x"}',
    "subtoken: x\nmonkey: y\nhotkey: z",
    '{"max_tokens": 128, "num_keys": 4}',
    "def f(password: str, token: Optional[str] = None) -> bytes:",
    "api_key = os.environ['WANDB_API_KEY']",
    "token = get_token()",
    "if token == other:",
    "KeyError: 'missing'",
    "Running HLO pass: algsimp",
    "%token.1 = token[] after-all(), sharding={replicated}",
    "func.func public @main(%arg0: !stablehlo.token {jax.token = true} loc(unknown))",
    "--xla_disable_hlo_passes=algsimp,cse --xla_dump_hlo_pass_re=^dce$",
    "sort_key: name\nsecret_name: x\nprimary key: id\nauth: none",
    "the basic operations of the model",
    "print(f'token: {token}')",
]


@pytest.mark.parametrize("text", KEPT)
def test_look_alikes_stay(text: str) -> None:
    assert R.text(text) == text


@pytest.mark.parametrize("text", [t for t, _, _ in CORPUS] + KEPT)
def test_needles_and_lines_change_nothing(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Binary data too: its needles see the text with every byte that is not ASCII a NUL.
    blob = b"\x00\xff\x12" + text.encode() + b"\x9a\n\x00"
    fast = R.text_with_report(text), R.find_in_bytes(blob)
    monkeypatch.setattr(Rule, "spans", lambda self, s: [(0, len(s))])
    assert fast == (R.text_with_report(text), R.find_in_bytes(blob))


ENVIRON = {
    "WANDB_API_KEY": "abc123def456",
    "HF_TOKEN": "hf-tok-0987\n",  # as $(cat token_file) may leave it
    "DB_PASS": "p@ss word!",
    "MY_SERVICE_AUTH": "zyx987wvu",
    "SENTRY_DSN": "https://k3y@o1.ingest.sentry.io/1",
    "SHORT_TOKEN": "abc12",  # under 6 characters: too common a string to hunt
    "CI_JOB_TOKEN_ENABLED": "true",
    "PWD": "/tmp",  # paths and settings, not secrets
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1",
    "XDG_SESSION_TYPE": "wayland",
    "TMUX_SESSION_SHELL": "python",  # a word too common to hunt
    "JAX_PLATFORMS": "cpu",
    "HOME": "/home/alice",
}


def test_env_secrets_are_the_values_of_secret_looking_variables() -> None:
    assert env_secrets(ENVIRON) == (
        "abc123def456",
        "hf-tok-0987",
        "https://k3y@o1.ingest.sentry.io/1",
        "p@ss word!",
        "zyx987wvu",
    )


def test_an_existing_path_is_no_secret_but_a_slash_leading_value_is() -> None:
    assert env_secrets({"GIT_CREDENTIAL_HELPER_DIR": "/tmp"}) == ()
    assert env_secrets({"AWS_SECRET_ACCESS_KEY": "/K7MDENGbPxRfiCYEXAMPLEKEY"}) == (
        "/K7MDENGbPxRfiCYEXAMPLEKEY",
    )


def test_a_secret_variables_value_leaves_every_text_it_is_printed_in() -> None:
    r = Redactor.for_this_machine(environ=ENVIRON)
    log = (
        "wandb: logged in with abc123def456.\n"
        "connecting as p@ss word! to hf-tok-0987/models\n"
        "abc12 and cpu stay; zyx987wvu goes\n"
    )
    out, counts = r.text_with_report(log)
    assert out == (
        f"wandb: logged in with {X}.\n"
        f"connecting as {X} to {X}/models\n"
        f"abc12 and cpu stay; {X} goes\n"
    )
    assert counts == Counter({SECRET: 4})
    assert "abc123def456" not in repr(r)
    # Binary files are searched for them too.
    assert r.find_in_bytes(b"\x00\x12abc123def456\xff") == ["abc1…"]


def test_the_default_environment_is_this_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XB_TEST_API_TOKEN", "t0k-from-env-42")
    assert Redactor.for_this_machine().text("t0k-from-env-42") == X
