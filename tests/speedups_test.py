"""What makes collect fast changes nothing it produces: redaction's needles, the device probe
started early, and the stage timings benchmarks read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.programs import clean_env
from xla_bugkit.bundle import devices, envinfo, installed
from xla_bugkit.redact import Redactor
from xla_bugkit.redact.rules import Rule
from xla_bugkit.ui import TIMINGS_ENV, Ui

pytestmark = pytest.mark.jax  # real jax programs, replay children or jax itself

_TEXTS = [
    "HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n"
    '%p = f32[4] parameter(0), metadata={op_name="jit(f)/key" source_file="/home/alice/x.py"}',
    "export API_KEY=abc123 TOKEN='x y' my.session-cookie=zzz password=\"hunter2\"",
    "Api_Key=abc secretSauce=1 PRIVATE=2 key = spaced",  # mixed case; spaces are no assignment
    "ghp_" + "a" * 30 + " github_pat_" + "b" * 25 + " AKIA" + "C" * 16 + " hf_" + "d" * 22,
    "sk-" + "e" * 24 + " xoxb-1234567890ab ya29." + "f" * 22 + " glpat-" + "g" * 22,
    "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
    "https://alice:pw@example.com/x Bearer abcdefghijklmnop1234 node='box7' user=alice",
    "alice@box7.corp.example:/home/alice/proj /Users/alice /home/alice2 C:\\Users\\alice",
    "ünïcode \u017fecret=1 KEY=2 \u212aEY=3 box7",  # not ASCII: the assignment test always runs
    "python x.py --api-key abc --hf_token=x --max-tokens 128 -p.secret-key 'v' --auth off",
    "['x.py', '--password', 'hunter2'] --tokenizer t5 BASIC abcdefghijklmnopqrs",
    '{"auth_token": "t0k", "Api-Key" : "v", "name": "ok", "tokens": 3, "SESSION_id":\n"s"}',
    'sort(keys), "key_of": x "token" : "not json" secret',  # words, but no JSON secret
    "",
]


@pytest.mark.parametrize("text", _TEXTS)
def test_redaction_is_the_same_with_and_without_needles(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = Redactor(
        home=["/home/alice"], user=["alice"], host=["box7.corp.example", "box7"], secrets=["pw"]
    )
    fast = r.text_with_report(text)
    monkeypatch.setattr(Rule, "may_match", lambda self, s: True)
    assert fast == r.text_with_report(text)


def test_the_early_probe_gives_what_a_late_one_would() -> None:
    env = {**clean_env(), "JAX_PLATFORMS": "cpu"}
    assert devices.start_device_probe(env)
    early = envinfo.collect_env(Redactor(), probe_devices=True, environ=env)
    late = envinfo.collect_env(Redactor(), probe_devices=True, environ=env)
    assert early.devices and early.devices == late.devices
    assert early.device_summary == late.device_summary


def test_no_early_probe_where_an_accelerator_could_be_contended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        installed, "dist_version", lambda d: "1.0" if d == "jax-cuda12-plugin" else "0.10.2"
    )
    assert not devices.cpu_only({})
    assert not devices.start_device_probe({})
    assert devices.cpu_only({"JAX_PLATFORMS": "cpu"})  # asked for the CPU alone


def test_stage_timings_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ui = Ui(verbosity=-1)
    monkeypatch.delenv(TIMINGS_ENV, raising=False)
    with ui.timed("index"):
        pass
    out = tmp_path / "t.jsonl"
    monkeypatch.setenv(TIMINGS_ENV, str(out))
    with ui.timed("index"), ui.timed("select"):
        pass
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["stage"] for x in lines] == ["select", "index"]
    assert all(x["wall"] >= 0 and x["cpu"] >= 0 for x in lines)
