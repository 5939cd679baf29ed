"""Tests for xla_bugkit.bundle.envinfo; the device probe runs a real jax child process on CPU."""

from __future__ import annotations

import getpass
import json
import re
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.programs import clean_env
from xla_bugkit import __version__
from xla_bugkit.bundle.envinfo import HERE_NOTE, NOT_INSTALLED, PYTHON_NOTE, collect_env
from xla_bugkit.redact import Redactor

pytestmark = pytest.mark.jax  # real jax programs, replay children or jax itself

COMMON_WORDS = {"localhost", "vm", "box", "ubuntu", "debian", "linux", "host", "root", "user"}


def _cpu_env(**extra: str) -> dict[str, str]:
    return {**clean_env(), **extra}


def test_versions_without_probing() -> None:
    report = collect_env(Redactor(), environ=_cpu_env())
    assert report.version("xla-bugkit") == __version__
    for dist in ("jax", "jaxlib", "numpy", "ml_dtypes", "protobuf", "py7zr"):
        assert report.version(dist) != NOT_INSTALLED
    assert report.version("no-such-dist") == NOT_INSTALLED
    assert report.devices == () and report.device_summary == "not probed"
    text = report.to_text()
    assert text.splitlines()[1].startswith("jax:")
    assert f"python: {sys.version.split()[0]}" in text
    assert "device info: not probed" in text


def test_the_programs_interpreter_is_reported_not_ours() -> None:
    # xla-bugkit installed in a venv of its own (pipx): the hook recorded the program's.
    program = {"python": "3.12.7", "python_executable": "/opt/project/.venv/bin/python",
               "jax": "0.4.38", "jaxlib": "0.4.38", "numpy": "1.26.4"}  # fmt: skip
    report = collect_env(Redactor(), environ=_cpu_env(), program=program)
    assert (report.version("jax"), report.version("jaxlib")) == ("0.4.38", "0.4.38")
    assert report.version("numpy") == "1.26.4"
    assert report.version("xla-bugkit") == __version__  # ours, whatever the program's
    assert report.version("protobuf") != NOT_INSTALLED  # not recorded: this machine's
    assert report.python == "3.12.7"
    assert "python: 3.12.7" in report.to_text()


def test_what_is_read_here_is_said_so_where_the_program_ran_under_another_interpreter() -> None:
    program = {"python": "3.12.7", "python_executable": "/opt/project/.venv/bin/python",
               "jax": "0.4.38", "jaxlib": "0.4.38", "tensorflow": "2.21.0"}  # fmt: skip
    report = collect_env(Redactor(), environ=_cpu_env(), program=program)
    text = report.to_text()
    assert re.search(r"^jaxlib: +0\.4\.38$", text, re.M), text
    assert re.search(r"^tensorflow: +2\.21\.0$", text, re.M), text  # as the program ran it
    assert re.search(rf"^numpy: +\S+ {re.escape(HERE_NOTE)}$", text, re.M), text
    assert re.search(rf"^protobuf: +\S+ {re.escape(HERE_NOTE)}$", text, re.M), text
    assert "python executable: /opt/project/.venv/bin/python\n" in text
    assert PYTHON_NOTE not in text and "torch" not in text  # the program imported none
    assert report.version("numpy") == metadata.version("numpy")  # the values stay plain


def test_the_programs_own_environment_needs_no_note() -> None:
    # The program's `python` beside xla-bugkit's own `python3`: one venv, the same packages.
    for python in (sys.executable, str(Path(sys.executable).with_name("python3.99"))):
        program = {"python": sys.version.split()[0], "python_executable": python}
        text = collect_env(Redactor(), environ=_cpu_env(), program=program).to_text()
        assert HERE_NOTE not in text and PYTHON_NOTE not in text


def test_without_the_programs_record_the_interpreter_and_versions_are_said_to_be_ours() -> None:
    text = collect_env(Redactor(), environ=_cpu_env()).to_text()
    assert f"python executable: {sys.executable} {PYTHON_NOTE}\n" in text
    assert re.search(rf"^jaxlib: +\S+ {re.escape(HERE_NOTE)}$", text, re.M), text
    assert re.search(r"^xla-bugkit: +\S+$", text, re.M), text


def test_collecting_does_not_import_jax_backends() -> None:
    # A backend initialised here would fix XLA_FLAGS for the rest of the process.
    code = (
        "import sys\n"
        "from xla_bugkit.bundle.envinfo import collect_env\n"
        "from xla_bugkit.redact import Redactor\n"
        "collect_env(Redactor())\n"
        "print('jax' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_probe_lists_cpu_devices_from_a_real_jax_child() -> None:
    report = collect_env(Redactor(), probe_devices=True, environ=_cpu_env())
    assert report.device_summary.startswith("cpu-1, 1 local devices"), report.device_summary
    assert any("CpuDevice(id=0)" in d for d in report.devices)
    assert "CpuDevice(id=0)" in report.to_text()


def test_probe_failure_is_a_note_not_an_error() -> None:
    report = collect_env(Redactor(), probe_devices=True, environ=_cpu_env(JAX_PLATFORMS="nope"))
    assert report.devices == ()
    assert report.device_summary.startswith("device probe failed (exited with status 1)")


def test_environment_is_allowlisted_and_redacted() -> None:
    r = Redactor(home="/home/alice", user="alice", host="alice-box")
    env = _cpu_env(
        XLA_FLAGS="--xla_dump_to=/home/alice/dumps",
        JAX_API_TOKEN="s3cr3t",
        GITHUB_TOKEN="s3cr3t",
        MY_VAR="x",
    )
    report = collect_env(r, environ=env)
    shown = dict(report.environment)
    assert shown["XLA_FLAGS"] == "--xla_dump_to=~/dumps"
    assert shown["JAX_PLATFORMS"] == "cpu"
    assert not {"JAX_API_TOKEN", "GITHUB_TOKEN", "MY_VAR", "HOME", "PATH"} & shown.keys()
    text = report.to_text()
    assert "XLA_FLAGS=--xla_dump_to=~/dumps" in text
    assert "s3cr3t" not in text and "s3cr3t" not in report.to_json()
    assert "MY_VAR" not in text


def test_json_shape() -> None:
    d = json.loads(collect_env(Redactor(), environ=_cpu_env()).to_json())
    assert d["uname"]["node"] == "<HOST>"
    assert d["versions"]["xla-bugkit"] == __version__
    assert d["environment"]["JAX_PLATFORMS"] == "cpu"
    assert isinstance(d["cpu_count"], int)


def test_report_has_no_name_of_this_machine() -> None:
    report = collect_env(Redactor.for_this_machine(), probe_devices=True, environ=_cpu_env())
    outputs = (report.to_text(), report.to_json())
    assert "node='<HOST>'" in outputs[0]
    user = getpass.getuser()
    if len(user) >= 4 and user.lower() not in COMMON_WORDS:
        assert all(user not in out for out in outputs)
    host = socket.gethostname()
    if len(host) < 4 or host.lower() in COMMON_WORDS:
        pytest.skip(f"host name {host!r} is a common word; cannot check for leaks")
    for out in outputs:
        assert host not in out
        assert host.split(".")[0] not in out
