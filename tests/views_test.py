"""One record, every view: a bundle's verify answer as text, as ``--json``, as the exit code
and through ``verify_bundle()``, its ISSUE.md (``show --issue``) and collect's summary; a
dump's replay as text, ``--json``, exit code and ``replay_dump()``. Each view renders the
one record (``Verdict``, ``VerifyResult``); here they must agree on the outcome, the kind
and the exit code, for every bundle the suite has: the ones recorded on a TPU, one built by
hand, real ones collected here (the README's example among them) and a real job's merge.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bundles import bundle_members
from tests.helpers.programs import PROGRAMS, TESTS, Collected, ProgramRuns, run_collect
from xla_bugkit.bundle.issue import plain
from xla_bugkit.cli.commands.verify import render_table
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode
from xla_bugkit.replay import replay_dump
from xla_bugkit.verdict import Outcome
from xla_bugkit.verify import VerifyResult, verify_bundle
from xla_bugkit.verify.result import Found

pytestmark = [pytest.mark.slow, pytest.mark.jax]

RECORDED = sorted((TESTS / "tpu" / "recorded").glob("*.zip"))
# The programs collected here: the README's example, then one of each way XLA fails.
COLLECTED = {
    "readme_example": ["-m", "xla_bugkit.examples.compile_crash"],
    "compile_error": [str(PROGRAMS / "compile_error.py")],
    "runtime_error": [str(PROGRAMS / "runtime_error.py")],
    "wrong_result": [str(PROGRAMS / "wrong_result.py")],
}
# The last line of verify's text, by its answer.
ENDINGS = {
    Found.REPRODUCED: "the recorded failure reproduces here",
    Found.NOT_REPRODUCED: "the recorded failure does NOT reproduce here",
    Found.UNVERIFIED: "the recorded failure is unverified here: ",
}
ISSUE_FAILURE = re.compile(r"^\*\*Failure:\*\* (.+) \(.*\)$", re.M)
ISSUE_VERDICT = re.compile(r"^\| `([^`]+)` \| \*\*([^*]+)\*\* \|", re.M)


def _manifest(bundle: Path) -> dict[str, Any]:
    with zipfile.ZipFile(bundle) as z:
        return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]


def _recorded(manifest: dict[str, Any]) -> dict[str, str]:
    """Each module's outcome in the reporter's replay, by label."""
    return {m["label"]: m["replay"]["outcome"] for m in manifest["modules"] if m.get("replay")}


def _modules(data: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """Each module of verify's JSON: its label, its outcome and the kind its replay met."""
    found = []
    for m in data["modules"]:
        v = m["verdict"]
        kind = v["failure"]["kind"] if v and v["failure"] else None
        found.append((m["label"], v["outcome"] if v else None, kind))
    return found


def check_verify_views(bundle: Path, capsys: pytest.CaptureFixture[str]) -> VerifyResult:
    """verify's API, ``--json`` and exit code, its text, and ISSUE.md, agreeing."""
    result = verify_bundle(bundle)
    capsys.readouterr()
    code = main(["verify", "-q", "--json", str(bundle)])
    data = json.loads(capsys.readouterr().out)
    # The answer and its exit code: the API, the JSON and the command's status.
    assert code == result.exit_code == data["exit_code"], (code, data["found"])
    assert data["found"] == result.found.value
    assert data["reproduced"] is (result.found is Found.REPRODUCED) is result.reproduced
    assert data["unverified"] is (result.found is Found.UNVERIFIED) is result.unverified
    assert _modules(data) == _modules(result.to_json())
    # The text, rendered from the same record: the kind, every module, the answer.
    kind = data["failure"]["kind"]
    text = render_table(result).splitlines()
    assert text[0].startswith(f"recorded failure: {kind}"), text[0]
    assert text[-1].startswith(ENDINGS[result.found]), text[-1]
    for m in data["modules"]:
        if m["verdict"] is not None:
            said = f"{m['label']}: {m['verdict']['outcome']}"
        elif m["unverified"] is not None:
            said = f"{m['label']}: unverified: needs {m['unverified']['needs']}"
        else:
            said = f"{m['label']}: not replayable here"
        assert any(line.startswith(said) for line in text), said
    check_issue(bundle, kind, capsys)
    return result


def check_issue(bundle: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """ISSUE.md (``show --issue``) and ``show``'s summary say the manifest's kind and its
    recorded verdicts."""
    manifest = _manifest(bundle)
    recorded = _recorded(manifest)
    assert main(["show", str(bundle)]) == ExitCode.OK
    summary = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"failure: {kind}") for line in summary), summary[:3]
    for label, outcome in recorded.items():
        assert any(line.startswith(f"module {label}: {outcome}") for line in summary), label
    assert main(["show", "--issue", str(bundle)]) == ExitCode.OK
    issue = capsys.readouterr().out
    said = ISSUE_FAILURE.search(issue)
    assert said is not None and said.group(1) == kind == manifest["failure"]["kind"]
    rows = dict(ISSUE_VERDICT.findall(issue))
    assert rows, "ISSUE.md shows no verdict"
    assert {label: recorded.get(label) for label in rows} == rows


@pytest.mark.parametrize("bundle", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_bundle_recorded_on_a_tpu_says_one_thing_in_every_view(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = check_verify_views(bundle, capsys)
    # A TPU's modules on this CPU machine: unverified, whatever the reporter's replay said.
    assert result.found is Found.UNVERIFIED and result.exit_code == ExitCode.UNVERIFIED


def test_a_bundle_built_by_hand_says_one_thing_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "hand.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        for name, data in bundle_members():
            z.writestr(name, data)
    result = verify_bundle(bundle)
    capsys.readouterr()
    code = main(["verify", "-q", "--json", str(bundle)])
    data = json.loads(capsys.readouterr().out)
    assert code == result.exit_code == data["exit_code"]
    assert data["found"] == result.found.value
    assert render_table(result).splitlines()[-1].startswith(ENDINGS[result.found])
    # Its ISSUE.md is one line, written by hand: no kind, no verdict to compare.


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Collected]:
    root = tmp_path_factory.mktemp("views")

    def collect(name: str) -> Collected:
        return run_collect(root / f"{name}.zip", [sys.executable, *COLLECTED[name]], cwd=root)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(COLLECTED, pool.map(collect, COLLECTED), strict=True))


@pytest.mark.parametrize("name", COLLECTED)
def test_a_collected_bundle_says_one_thing_in_every_view(
    name: str, collected: dict[str, Collected], capsys: pytest.CaptureFixture[str]
) -> None:
    done = collected[name]
    assert done.bundle.is_file(), done.stderr[-3000:]
    recorded = _recorded(done.manifest())
    # collect's summary and exit code say what its manifest records.
    for label, outcome in recorded.items():
        assert f"replay {label}: {outcome} (" in done.stderr, (label, outcome)
    blame = done.manifest()["blame"]
    proven = blame["whose"] == "xla"
    if proven:
        assert any(o.startswith("reproduced") for o in recorded.values())
    assert done.returncode == (ExitCode.OK if proven else ExitCode.NOT_REPRODUCED)
    # The title names XLA, and the summary links an issue, exactly where the blame is XLA's.
    assert done.manifest()["title"].startswith("XLA") is proven
    assert ("issues/new" in done.stderr) is proven
    result = check_verify_views(done.bundle, capsys)
    # Verified on the machine that made it: each module's verdict is the reporter's.
    for check in result.checks:
        assert check.same_as_reporter is not False, (check.label, check.recorded)


def test_a_shrink_says_one_thing_in_every_view(
    collected: dict[str, Collected], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The issue's own case: the README's example shrunk without the flags stage, which
    # wrote "fails without any of the 2 recorded flags" into ISSUE.md.
    out = tmp_path / "shrunk.zip"
    bundle = str(collected["readme_example"].bundle)
    assert main(["shrink", "-q", bundle, "-o", str(out), "--only", "module,passes"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[-1] == f"bundle: {out}"
    findings = text[:-1]
    record = _manifest(out)["shrink"]
    with zipfile.ZipFile(out) as z:
        issue = z.read("ISSUE.md").decode()
    section = issue[issue.index("#### Shrunk reproducer") :].split("\n\n")[1]
    bullets = [line.removeprefix("- ") for line in section.splitlines()]
    # ISSUE.md says each finding the text says, and adds only where to look in the bundle.
    assert [plain(f) for f in findings] == bullets[: len(findings)]
    assert all(
        b.startswith(("reproduce it alone: ", "the module right")) for b in bullets[len(findings) :]
    )
    # The record (what --json prints) says the same stages, and no flag finding.
    assert (record["stages"], record["skipped"]) == (["module", "passes"], ["flags"])
    assert record["needed_flags"] == [] and "not run (--only): the flags stage" in findings
    assert not [f for f in findings if "recorded flags" in f or f.startswith("needs ")]
    assert set(record["notes"]) <= set(findings)
    check_verify_views(out, capsys)


def test_a_merged_job_says_one_thing_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The job of merge's own tests: process 1 of 2 crashes compiling the step.
    from tests.collecting.merge_test import _job, _merge

    survivor, crashed = _job(tmp_path / "job", 2, "crash-1")
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), str(survivor.bundle), str(crashed.bundle))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    result = check_verify_views(out, capsys)
    assert result.found is Found.REPRODUCED


@pytest.mark.parametrize(
    ("name", "module", "code"),
    [
        ("compile_crash", "jit_add_noise$", ExitCode.OK),
        ("compile_error", "jit_train_step$", ExitCode.OK),
        ("runtime_error", "jit_make_buffer$", ExitCode.OK),
        ("success", "jit_train_step$", ExitCode.NOT_REPRODUCED),
    ],
)
def test_a_dump_replayed_says_one_thing_in_every_view(
    name: str,
    module: str,
    code: ExitCode,
    program_runs: ProgramRuns,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dump = program_runs[name].dump_dir
    chosen = ["--module", module] if module else []
    verdicts = replay_dump(dump, module_re=module or None)
    capsys.readouterr()
    assert main(["replay", "-q", "--json", str(dump), *chosen]) == code
    data = json.loads(capsys.readouterr().out)
    assert main(["replay", "-q", str(dump), *chosen]) == code
    text = capsys.readouterr().out
    assert [(v["module"], v["outcome"]) for v in data] == [
        (v.module, v.outcome.value) for v in verdicts
    ]
    for v in data:
        assert f"{v['module']}: {v['outcome']}: " in text
        # A failure the replay met is what its verdict says it reproduced.
        if v["outcome"] == Outcome.NOT_REPRODUCED.value:
            assert v["failure"] is None or v["failure"]["kind"] == "success", v
    proven = any(v.reproduced for v in verdicts)
    assert code == (ExitCode.OK if proven else ExitCode.NOT_REPRODUCED)
