"""The program's own interpreter and framework versions: recorded by the start-up hook in the
program's process (``recorder.versions``, a ``versions`` record on each watched import), read
back (``evidence``) and chosen for the bundle (``processes.program_versions``).

TensorFlow and torch_xla are not installed here: stand-in packages of those names, each
only a ``__version__``, are what a real process imports under the hook.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from tests.helpers.programs import clean_env, hooked_env, run
from xla_bugkit.run import evidence_files, processes
from xla_bugkit.run.evidence import ProcessEvidence
from xla_bugkit.run.hook import recorder

STAND_INS = {"tensorflow": "2.99.0", "torch": "2.98.0", "torch_xla": "2.97.0"}


def stand_ins(folder: Path) -> Path:
    """Packages named as the frameworks, each only its ``__version__``."""
    for name, version in STAND_INS.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return folder


def test_versions_are_read_from_what_the_interpreter_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, version in STAND_INS.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(__version__=version))
    for name in ("numpy", "numpy.version"):  # no string: no version
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(__version__=3))
    found = recorder.versions()
    assert found["python"] == sys.version.split()[0]
    assert found["python_executable"] == sys.executable
    assert {k: found[k] for k in STAND_INS} == STAND_INS
    assert "numpy" not in found


@pytest.mark.parametrize("imports", ["tensorflow", "torch, torch_xla"])
def test_a_process_that_imports_another_framework_records_its_versions(
    imports: str, tmp_path: Path
) -> None:
    """A real process under the hook: TensorFlow and torch_xla start no backend the hook
    sees, so its ``versions`` record is the only word of what the program ran."""
    base = clean_env()
    base["PYTHONPATH"] = str(stand_ins(tmp_path / "site"))
    done = run([sys.executable, "-c", f"import {imports}"], hooked_env(tmp_path, base), tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    (recorded,) = evidence_files.load(tmp_path)
    assert not recorded.started_backend
    imported = [name.strip() for name in imports.split(",")]
    assert {k: recorded.versions.get(k) for k in imported} == {k: STAND_INS[k] for k in imported}
    assert recorded.versions["python_executable"] == sys.executable
    assert processes.program_versions(None, [recorded])["python"] == sys.version.split()[0]


def _write(folder: Path, pid: int, *records: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    start = {"e": "start", "t": 1.0, "pid": pid, "ppid": 1, "argv": ["x.py"], "cwd": "/"}
    (folder / f"{pid}.jsonl").write_text("\n".join(json.dumps(r) for r in (start, *records)) + "\n")


def test_versions_records_and_the_backends_are_read_together(tmp_path: Path) -> None:
    folder = tmp_path / evidence_files.PROCESSES
    python = {"python": "3.13.1", "python_executable": "/venv/bin/python"}
    _write(
        folder, 10,
        {"e": "versions", "t": 2, "versions": {**python, "tensorflow": "2.21.0"}},
        {"e": "backend", "t": 3, "platform": "cpu", "versions": {**python, "jaxlib": "0.10.1"}},
        {"e": "versions", "t": 4, "versions": {**python, "torch_xla": "2.9.0", "n": 7}},
    )  # fmt: skip
    (p,) = evidence_files.load(tmp_path)
    assert p.versions == {**python, "tensorflow": "2.21.0", "jaxlib": "0.10.1",
                          "torch_xla": "2.9.0", "n": "7"}  # fmt: skip


def _process(pid: int, versions: dict[str, str], **fields: object) -> ProcessEvidence:
    return ProcessEvidence(pid=pid, ppid=1, argv=(), events=(), versions=versions, **fields)  # type: ignore[arg-type]


def test_the_failing_process_gives_the_versions_else_the_first_that_imported_a_framework() -> None:
    launcher = _process(1, {"python": "3.12.1", "python_executable": "/usr/bin/python3"})
    program = _process(2, {"python": "3.13.1", "python_executable": "/venv/bin/python",
                           "tensorflow": "2.21.0"})  # fmt: skip
    worker = _process(3, {"python_executable": "/venv/bin/python", "tensorflow": "2.20.0"})
    assert processes.program_versions(None, [launcher, program, worker]) == program.versions
    assert processes.program_versions(None, [launcher]) == {}
    assert processes.program_versions(None, []) == {}
    failed = _process(4, {"python_executable": "/other/bin/python", "jaxlib": "0.10.1"},
                      platform="cpu")  # fmt: skip
    culprit = processes.failing([failed])
    assert processes.program_versions(culprit, [program]) == failed.versions
