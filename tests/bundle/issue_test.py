"""Tests for xla_bugkit.bundle.issue: jax's bug-form headings, escaping, titles."""

from __future__ import annotations

import re

from xla_bugkit.bundle.issue import (
    LOG_TAIL_LINES,
    TITLE_MAX,
    IssueContext,
    code_span,
    fenced,
    render_issue,
    title_for,
)

SIGNATURE = "buffer_assignment_util.cc:46 Check failed: const_instr == nullptr"
NASTY_LOG = "\n".join(
    [f"line {i}" for i in range(100)]
    + ["```", "</details>", "````python", "@octocat <script>alert(1)</script>", "last line"]
)


def _ctx(**changes: object) -> IssueContext:
    fields: dict[str, object] = {
        "title": title_for("compile-time crash", SIGNATURE, platform="cpu"),
        "failure_kind": "compile-time crash",
        "signature": SIGNATURE,
        "description": "XLA aborts while compiling `jit_train_step` on CPU.",
        "command": "python ~/proj/train.py --steps 3",
        "exit_status": "killed by SIGABRT",
        "verify_command": "xla-bugkit verify bundle.zip",
        "system_info": "jax:    0.10.2\njaxlib: 0.10.2\nplatform: uname_result(node='<HOST>')",
        "log_tail": NASTY_LOG,
        "jax_version": "0.10.2",
        "jaxlib_version": "0.10.2",
        "bundle_name": "bundle.zip",
        "selected_modules": [
            ("module_0006.jit_train_step", "the module being compiled at the crash"),
            ("module_0007.jit_a|b", "has a snapshot | inputs"),
        ],
        "replay_verdicts": [("module_0006.jit_train_step", "reproduced", "same CHECK at :46")],
    }
    fields.update(changes)
    return IssueContext(**fields)  # type: ignore[arg-type]


def test_jax_bug_form_headings_in_order() -> None:
    body = render_issue(_ctx())
    headings = re.findall(r"^### .*$", body, re.M)
    assert headings == [
        "### Description",
        "### System info (python version, jaxlib version, accelerator, etc.)",
    ]
    assert "#### What the bundle holds" in body and "#### Replay" in body


def test_reproduce_and_system_info_blocks() -> None:
    body = render_issue(_ctx())
    assert "```shell\npip install xla-bugkit && xla-bugkit verify bundle.zip\n```" in body
    system = body.split("### System info (python version, jaxlib version, accelerator, etc.)")[1]
    info = "jax:    0.10.2\njaxlib: 0.10.2\nplatform: uname_result(node='<HOST>')"
    assert f"```text\n{info}\n```" in system
    assert "`buffer_assignment_util.cc:46 Check failed: const_instr == nullptr`" in body
    assert "$" not in body.replace("$$", "")  # no placeholder left unfilled


def test_log_tail_is_bounded_and_cannot_break_out() -> None:
    body = render_issue(_ctx())
    summary = f"<summary>Last {LOG_TAIL_LINES} lines of the program's output</summary>"
    assert summary in body
    block = body.split(summary)[1]
    # The fence is longer than any backtick run inside, so only it can close the block.
    assert block.lstrip().startswith("`````text\n")
    inner, after = block.lstrip()[len("`````text\n") :].split("\n`````\n", 1)
    assert inner.splitlines()[-1] == "last line" and len(inner.splitlines()) == LOG_TAIL_LINES
    assert "</details>" in inner and "line 39" not in inner.splitlines()
    assert after.lstrip().startswith("</details>")
    assert body.count("<details>") == 1


def test_tables_escape_pipes_html_and_mentions() -> None:
    body = render_issue(
        _ctx(replay_verdicts=[("m|1", "not reproduced", "<b>boom</b> cc @octocat | x")])
    )
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Module | Why it is included |"
    assert rows[2] == "| `module_0007.jit_a\\|b` | has a snapshot \\| inputs |"
    verdict = rows[-1]
    assert verdict.startswith("| `m\\|1` | **not reproduced** | &lt;b&gt;boom&lt;/b&gt;")
    assert "@<!-- -->octocat" in verdict
    assert verdict.count(" | ") == 2  # three cells, however nasty the content


def test_empty_tables_and_title_comment_cannot_close() -> None:
    body = render_issue(_ctx(selected_modules=[], replay_verdicts=[], title="a --> b"))
    assert body.count("_None._") == 2
    comment = body[: body.index("-->") + 3]
    assert "a - -> b" in comment and comment.count("-->") == 1


def test_fenced_and_code_span_helpers() -> None:
    assert fenced("a ``` b") == "````\na ``` b\n````"
    assert fenced("") == "```\n```"
    assert code_span("x`y") == "``x`y``"
    assert code_span("`start") == "`` `start ``"
    assert code_span("a\n  b") == "`a b`"


def test_title_for() -> None:
    assert title_for("compile-time crash", SIGNATURE, platform="cpu") == (
        "XLA CPU compile-time crash: Check failed: const_instr == nullptr "
        "(buffer_assignment_util.cc:46)"
    )
    glog = "F0102 03:04:05.678901  1234 xla/service/foo.cc:12] Check failed: a == b"
    assert title_for("compile crash", glog) == "XLA compile crash: Check failed: a == b (foo.cc:12)"
    assert title_for("JAX runtime error", "INTERNAL: boom") == "JAX runtime error: INTERNAL: boom"
    assert title_for("XLA crash", "") == "XLA crash"


def test_long_title_keeps_the_site() -> None:
    title = title_for("compile-time crash", "gpu_compiler.cc:99 " + "x" * 300, platform="gpu")
    assert len(title) <= TITLE_MAX
    assert title.endswith("… (gpu_compiler.cc:99)")
