"""The manifest's ``shrink`` record: optional (older bundles load), checked when present, and
the ISSUE.md section it comes with."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from xla_bugkit.bundle.issue import shrink_section, with_section
from xla_bugkit.bundle.manifest import SCHEMA_VERSION, validate
from xla_bugkit.errors import BadBundleError
from xla_bugkit.shrink.passes import Culprit
from xla_bugkit.shrink.result import ShrinkResult

MANIFEST: dict[str, Any] = {
    "schema": SCHEMA_VERSION, "tool": "xla-bugkit 0.1.0", "title": "t",
    "created": "2026-12-02T00:00:00+00:00", "versions": {}, "command": [], "xla_flags": [],
    "exit_status": None, "guess": False, "modules": [], "other_modules": 0, "data": "",
    "notes": [], "files": [],
    "failure": {"kind": "success", "phase": "run", "headline": "", "signature": ""},
}  # fmt: skip
RESULT = ShrinkResult(
    module="module_0000.jit_f", text="HloModule m\n", oracle="wrong result: inf mismatch",
    instructions_before=378, instructions_after=3, probes=26, seconds=51.2, probe_seconds=42.7,
    culprit=Culprit("algsimp", "disabling-hides"), needed_flags=(), user_flags=1,
    workarounds=("--xla_disable_hlo_passes=algsimp",),
)  # fmt: skip


def test_a_bundle_without_a_shrink_record_still_loads() -> None:
    assert "shrink" not in validate(copy.deepcopy(MANIFEST))


def test_a_shrink_record_loads() -> None:
    record = RESULT.record()
    # seconds: the whole shrink's wall time; probe_seconds: the part --budget limits.
    assert (record["seconds"], record["probe_seconds"]) == (51.2, 42.7)
    assert validate({**MANIFEST, "shrink": record})["shrink"]["culprit"] == {
        "pass": "algsimp",
        "how": "disabling-hides",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("culprit", {"pass": "algsimp", "how": "guessed"}),
        ("probes", -1),
        ("needed_flags", "--xla_a"),
        ("seconds", float("nan")),
        ("probe_seconds", -3.0),
    ],
)
def test_a_bad_shrink_record_is_refused(key: str, value: object) -> None:
    record = {**RESULT.record(), key: value}
    with pytest.raises(BadBundleError, match=f"the shrink record: '{key}' must be"):
        validate({**MANIFEST, "shrink": record})


def test_the_findings_read_as_the_issue_asks() -> None:
    lines = RESULT.findings()
    assert lines[0].startswith("shrunk: 378 → 3 instructions; same failure")
    assert lines[1] == (
        "disabling HLO pass algsimp hides the failure (not proof that algsimp is at fault)"
    )
    assert "passes with: --xla_disable_hlo_passes=algsimp" in lines


def test_the_issue_section_goes_before_system_info() -> None:
    section = shrink_section(RESULT.findings(), "HloModule m\n", "shrunk/m.txt")
    issue = with_section("### Description\n\ntext\n\n### System info\n\nx\n", section)
    assert issue.index("#### Shrunk reproducer") < issue.index("### System info")
    assert "```text\nHloModule m\n```" in issue


def test_without_the_flags_stage_nothing_is_said_of_the_flags() -> None:
    # shrink --only module,passes on a run with 2 flags: it used to say "fails without any
    # of the 2 recorded flags", which only the flags stage can show.
    result = replace(RESULT, user_flags=2, stages=("module", "passes"))
    lines = result.findings()
    assert not [line for line in lines if "recorded flags" in line or line.startswith("needs ")]
    assert "not run (--only): the flags stage" in lines
    record = result.record()
    assert (record["stages"], record["skipped"]) == (["module", "passes"], ["flags"])


def test_the_flags_stage_alone_says_what_it_found_and_no_more() -> None:
    result = replace(RESULT, user_flags=2, culprit=None, instructions_after=378, stages=("flags",))
    lines = result.findings()
    assert lines[0].startswith("not shrunk: 378 instructions; same failure")
    assert "fails without any of the 2 recorded flags" in lines
    assert "not run (--only): the module and passes stages" in lines
    assert result.record()["skipped"] == ["module", "passes"]


def test_a_full_shrink_names_no_stage_as_skipped() -> None:
    assert not [line for line in RESULT.findings() if "not run" in line]
    assert RESULT.record()["skipped"] == []
    assert "fails without any of the 1 recorded flags" in RESULT.findings()
