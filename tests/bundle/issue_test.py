"""Tests for xla_bugkit.bundle.issue: jax's bug-form headings, escaping, titles, the log
tail, and the optional sections (ways to reproduce, wrong values, the module inline)."""

from __future__ import annotations

import re

from tests.helpers.programs import ProgramRuns
from xla_bugkit import __version__
from xla_bugkit.bundle import installed
from xla_bugkit.bundle.issue import (
    LOG_TAIL_LINES,
    TITLE_MAX,
    IssueContext,
    code_span,
    cut_title,
    fenced,
    log_tail,
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
    # A RET_CHECK: its condition is the news, its site goes last, whole.
    ret_check = (
        "INTERNAL: RET_CHECK failure (xla/service/cpu/dot_op_emitter.cc:1124) "
        "PRED == type || S8 == type || F32 == type"
    )
    title = title_for("compile error", ret_check, platform="cpu")
    assert title.startswith("XLA CPU compile error: RET_CHECK failed: PRED == type || S8 == ")
    assert title.endswith(" (dot_op_emitter.cc:1124)") and len(title) <= TITLE_MAX


def test_long_title_keeps_the_site() -> None:
    title = title_for("compile-time crash", "gpu_compiler.cc:99 " + "x" * 300, platform="gpu")
    assert len(title) <= TITLE_MAX
    assert title.endswith("… (gpu_compiler.cc:99)")


def test_log_tail_drops_blank_trace_lines_and_keeps_the_check(program_runs: ProgramRuns) -> None:
    """XLA's real abort: the CHECK line, then a stack trace with banners and blank lines."""
    output = program_runs["compile_crash"].output
    assert "\n\n*** Check failure stack trace: ***" in output  # what the tail must clean up
    tail, count = log_tail(output)
    lines = tail.splitlines()
    assert count == len(lines) and all(line.strip() for line in lines)
    assert not any(line.startswith("***") for line in lines)
    assert any("Check failed: const_instr == nullptr" in line for line in lines)
    # Too few lines for the whole trace: the CHECK line stays, then the end of the output.
    short, _ = log_tail(output, 6)
    first, gap, *end = short.splitlines()
    assert "buffer_assignment_util.cc:46] Check failed" in first
    assert re.fullmatch(r"\[\.\.\. \d+ lines not shown \.\.\.\]", gap)
    assert end == lines[-4:]


def test_ways_to_reproduce_quickest_first() -> None:
    body = render_issue(
        _ctx(repro_command="python repro.py", hlo_command="run_hlo_module --platform=cpu m.txt")
    )
    script = body.index("```shell\npython repro.py\n```")
    hlo = body.index("```shell\nrun_hlo_module --platform=cpu m.txt\n```")
    verify = body.index("```shell\npip install xla-bugkit && xla-bugkit verify bundle.zip\n```")
    assert script < hlo < verify


def test_an_xla_bugkit_installed_from_a_clone_is_got_from_a_clone() -> None:
    # Installed as the README installs it (a clone): ISSUE.md used to say
    # `pip install xla-bugkit==0.1.0 && ...`, a version a package index may not have.
    body = render_issue(_ctx(repro_command="python repro.py", install=installed.FROM_CLONE))
    script = body.index("```shell\npython repro.py\n```")
    verify = body.index(
        "Or, thoroughly, replay every module of the bundle against reference results, with "
        f"xla-bugkit {__version__} installed from a clone of its repository, as its README says "
        "(`python -m pip install .` in the clone):\n\n```shell\nxla-bugkit verify bundle.zip\n```"
    )
    assert script < verify
    assert "pip install xla-bugkit" not in body and installed.FROM_CLONE not in body


def test_alone_the_verify_line_from_a_clone_opens_with_the_clone() -> None:
    body = render_issue(_ctx(install=installed.FROM_CLONE))
    assert f"With xla-bugkit {__version__} installed from a clone of its repository" in body


def test_without_a_script_the_reason_comes_first_and_no_option_begins_with_or() -> None:
    body = render_issue(
        _ctx(
            repro_missing="the module runs on 4 devices; xla-bugkit verify replays it",
            hlo_command="run_hlo_module --platform=cpu m.txt",
        )
    )
    reproduce = body[body.index("**To reproduce**") :]
    assert "The bundle has no standalone script: the module runs on 4 devices" in reproduce
    assert "With XLA's `run_hlo_module`" in reproduce and "Or with" not in reproduce
    assert "Or, thoroughly, replay every module" in reproduce
    # Neither: the reason, then verify as the one way.
    body = render_issue(_ctx(repro_missing="the module cannot be replayed (a host callback)"))
    reproduce = body[body.index("**To reproduce**") :]
    assert "run_hlo_module" not in reproduce and "Or" not in reproduce.split("<details>")[0]
    assert "Replay every module of the bundle against reference results:" in reproduce


def test_absent_sections_leave_no_trace() -> None:
    body = render_issue(_ctx())
    assert "\n\n\n" not in body.split("<details>")[0]
    for text in ("python repro.py", "run_hlo_module", "First differing values", "<summary>The"):
        assert text not in body


def test_wrong_values_and_inputs_are_escaped() -> None:
    body = render_issue(
        _ctx(
            wrong_values=[("[32768]", "1.5662668", "4.1137714"), ("[1|2]", "`a`", "<b>")],
            reference="op-by-op",
            inputs="f32[32769,3] (the reporter's, in the snapshot)",
        )
    )
    table = body.split("**First differing values** (the op-by-op reference against XLA's")[1]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Output index | Reference | XLA |"
    assert rows[1] == "| `[32768]` | `1.5662668` | `4.1137714` |"
    assert rows[2] == "| `[1\\|2]` | `` `a` `` | `<b>` |"
    assert "**Inputs:** f32[32769,3] (the reporter's, in the snapshot)" in body


def test_a_small_module_shows_in_a_collapsed_block() -> None:
    hlo = "HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1) ```\n}\n"
    body = render_issue(_ctx(module_label="module_0001.jit_f", module_text=hlo))
    summary = (
        "<summary>The module before XLA's optimizations (module_0001.jit_f, 5 lines)</summary>"
    )
    block = body.split(summary)[1].split("</details>")[0]
    assert block.strip().startswith("````text\nHloModule m\n\nENTRY")  # outlasts the ```
    assert body.count("<details>") == 2


def test_the_shown_module_leaves_its_stack_frame_tables_to_the_bundles_file() -> None:
    hlo = (
        'HloModule m\n\nFileNames\n1 "/home/u/train.py"\n\nFunctionNames\n1 "loss"\n\n'
        "FileLocations\n1 {file_name_id=1 function_name_id=1 line=4}\n\n"
        "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n\n"
        "ENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1), "
        "metadata={stack_frame_id=1}\n}\n"
    )
    body = render_issue(_ctx(module_label="module_0001.jit_f", module_text=hlo))
    summary = (
        "<summary>The module before XLA's optimizations (module_0001.jit_f, 5 lines without "
        "its stack-frame tables)</summary>"
    )
    block = body.split(summary)[1].split("</details>")[0]
    assert "HloModule m\n\nENTRY %main" in block and "stack_frame_id=1" in block
    assert "FileNames" not in block and "train.py" not in block


def test_replay_note_stands_in_for_an_empty_table() -> None:
    body = render_issue(_ctx(replay_verdicts=[], replay_note="None: the replay was skipped."))
    assert body.split("#### Replay\n\n")[1].startswith("None: the replay was skipped.\n")


def test_cut_title() -> None:
    assert cut_title("XLA CPU hang\nin  jit(f)") == "XLA CPU hang in jit(f)"
    long = cut_title("x" * 300)
    assert len(long) == TITLE_MAX and long.endswith("…")


def test_a_failure_only_the_frameworks_own_xla_shows_is_replayed_there() -> None:
    body = render_issue(_ctx(native_only="torch_xla 2.9.0's own XLA",
                             repro_command="python repro.py"))  # fmt: skip
    steps = body.split("**To reproduce**", 1)[1].split("####", 1)[0]
    assert "shows under torch_xla 2.9.0's own XLA only" in steps
    assert "python repro.py" not in steps  # jaxlib's script would show nothing
    assert "xla-bugkit verify bundle.zip" in steps


def test_a_run_that_did_not_fail_shows_no_empty_key_line() -> None:
    body = render_issue(_ctx(signature="", failure_kind="success"))
    assert "**Key line:** none (no failure)" in body
    assert "``" not in body.split("**Command**")[0]
