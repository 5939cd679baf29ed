"""What a bundle's report says, from real collects: titles, the wrong values, the ways to
reproduce, the script with --include-source, and "not an XLA bug"."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, XLA_BUGKIT, Collected, clean_env, run_collect
from xla_bugkit import proc
from xla_bugkit.bundle.issue import TITLE_MAX
from xla_bugkit.bundle.triage import triage
from xla_bugkit.failure.classify import Failure

pytestmark = pytest.mark.slow  # real jax programs, end to end

FAKE_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
NOT_XLA = "this does not look like an XLA bug"


def assert_no_issue_link(c: Collected) -> None:
    assert "issues/new" not in c.stderr and "gh issue create" not in c.stderr


def test_wrong_result_is_named_with_its_numbers(bundles: Callable[..., Collected]) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    assert c.returncode == 0, c.stderr
    title = c.manifest()["title"]
    assert re.fullmatch(
        r"XLA CPU wrong result in jit\(f\): 1 of (16385|32769) elements differ", title
    ), title
    issue = c.text("ISSUE.md")
    assert "non-XLA failure" not in title + issue
    assert "**Failure:** wrong result (exit status 1)" in issue
    assert "XLA computes a wrong result in `jit(f)`, with no error: 1 of " in issue
    # The first differing element, reference against XLA, and the inputs' shapes.
    row = re.search(r"^\| `\[(16384|32768)\]` \| `(\S+)` \| `(\S+)` \|$", issue, re.M)
    assert row and row.group(2) != row.group(3), issue
    assert re.search(r"\*\*Inputs:\*\* f(32|64)\[(16385|32769),3\] \(the reporter's", issue)
    assert "xla-bugkit: wrong result in jit(f): result differs from the op-by-op" in c.stderr


def test_a_wrong_result_shipped_without_its_inputs_says_so(
    bundles: Callable[..., Collected],
) -> None:
    # The replay showed it on the run's own inputs; the size budget left them out: the
    # report must not claim that replaying the bundle reproduces it.
    c = bundles("wrong_result", "--module", r"\.jit_f$", "--max-size", "120kB")
    assert c.returncode == 0, c.stderr
    notes = c.manifest()["notes"]
    assert any(n.startswith("left out to fit the size budget: ") and ".snapshot." in n
               for n in notes), notes  # fmt: skip
    issue = c.text("ISSUE.md")
    assert "reproduces it without the original program" not in issue
    assert (
        "showed it on the run's real inputs, which this bundle leaves out (left out to fit "
        "the size budget)" in issue
    )


def test_issue_shows_repro_then_run_hlo_module_then_verify(
    bundles: Callable[..., Collected], tmp_path: Path
) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    issue = c.text("ISSUE.md")
    script = issue.index("```shell\npython repro.py\n```")
    hlo = issue.index("run_hlo_module --platform=cpu --input_format=hlo ")
    verify = issue.index(f"xla-bugkit verify {c.bundle.name}")
    assert script < hlo < verify
    # The command names a file that is in the bundle, with the flags in force.
    command = issue[hlo:].split("\n", 1)[0]
    assert command.split()[-1] in c.names()
    assert "--xla_cpu_enable_fast_min_max=false" in command
    assert "--xla_dump" not in command
    # With the recorded inputs, written first by a line that works as written in the bundle.
    assert "--input_literals_file=inputs.literals.pb" in command
    write = issue[:hlo].rstrip("\n").rsplit("\n", 1)[1]
    assert write.startswith("xla-bugkit convert --to literals ") and write.split()[-2] in c.names()
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(c.bundle) as z:
        z.extractall(unpacked)
    argv = [XLA_BUGKIT, *write.split()[1:]]
    done = subprocess.run(argv, cwd=unpacked, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (unpacked / "inputs.literals.pb").stat().st_size > 0


def test_a_small_module_is_shown_inline(bundles: Callable[..., Collected]) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$")
    issue = c.text("ISSUE.md")
    block = issue.split("<summary>The module before XLA's optimizations (module_", 1)[1]
    block = block.split("</details>", 1)[0]
    assert "HloModule jit_f" in block and "ENTRY %main" in block
    # The function as JAX traced it, from the jaxpr JAX dumped as it lowered the module.
    jaxpr = issue.split("<summary>The function as JAX traced it (jaxpr, ", 1)[1]
    jaxpr = jaxpr.split("</details>", 1)[0]
    assert "{ lambda" in jaxpr and "jax_" in jaxpr and ".jaxpr.txt" in jaxpr
    label = c.manifest()["modules"][0]["label"]
    jaxpr_member = c.manifest()["modules"][0]["files"]["jaxpr"]
    assert jaxpr_member.startswith(f"modules/{label}/jax_") and jaxpr_member in c.names()
    assert issue.count("<details>") == 3  # the module, its jaxpr and the program's output


def test_a_python_error_is_not_an_xla_bug(bundles: Callable[..., Collected]) -> None:
    c = bundles("value_error")
    assert c.returncode == 3, c.stderr  # the bundle is written, nothing reproduced
    assert f"{NOT_XLA}: the program raised ValueError, a Python error" in c.stderr
    assert "did not reproduce it" in c.stderr  # the replay ran and found nothing
    assert_no_issue_link(c)
    issue = c.text("ISSUE.md")
    assert "**This does not look like an XLA bug:** the program raised ValueError" in issue
    assert not c.manifest()["title"].startswith("XLA")


def test_a_nan_the_ynn_fusion_drops_is_proven_against_references_without_it(
    bundles: Callable[..., Collected],
) -> None:
    """The references turn the YNN fusion off and propagate the input's NaN: a reference
    NaN where the inputs hold one is judged, and XLA's 1.0 there is the wrong result."""
    c = bundles("ynn_max_nan")
    assert c.returncode == 0, c.stderr
    [module] = c.manifest()["modules"]
    assert module["replay"]["outcome"] == "reproduced: wrong result", c.stderr
    assert c.manifest()["title"].startswith("XLA CPU wrong result in jit(worst_loss)")
    assert "issues/new" in c.stderr


def test_a_segfault_in_the_programs_own_ctypes_call_is_not_xlas(
    bundles: Callable[..., Collected],
) -> None:
    """XLA may be running the jitted step on its own threads as the program's ctypes call
    reads unmapped memory: the thread the signal hit says whose the crash is."""
    c = bundles("ctypes_segfault")
    assert c.returncode == 3, c.stderr
    said = " ".join(c.stderr.split())
    assert (
        f"{NOT_XLA}: the process died on SIGSEGV in the program's own code, string_at "
        "(ctypes/__init__.py:"
    ) in said
    assert "from <module> (ctypes_segfault.py:29)" in said
    assert c.manifest()["failure"]["native"].startswith("string_at (ctypes/__init__.py:")
    assert_no_issue_link(c)


def test_the_hooks_wait_on_a_donated_output_is_never_the_programs_error(
    bundles: Callable[..., Collected],
) -> None:
    """Every step's outputs but the last were donated to the next step when the program's
    own KeyError ended it: the hook's end-of-run wait on them must not become the failure."""
    c = bundles("donated_then_keyerror")
    assert c.returncode == 3, c.stderr
    assert "deleted or donated buffer" not in c.stderr
    assert f"{NOT_XLA}: the program raised KeyError, a Python error" in c.stderr
    assert c.manifest()["failure"]["headline"] == "KeyError: 'step7'"
    assert_no_issue_link(c)


def test_a_check_tighter_than_float32_is_traced_to_the_module_as_lowered(
    bundles: Callable[..., Collected],
) -> None:
    c = bundles("tight_tolerance")
    assert c.returncode == 3, c.stderr  # written; XLA's result agrees with its references
    reason = " ".join(c.stderr.split())
    assert (
        "the program's own check found a wrong value, but XLA computes jit(running_mean) on "
        "the recorded inputs as its references do (op-by-op, conservative flags)"
    ) in reason, c.stderr
    assert "look at the function's jaxpr (in the bundle) and at the check" in reason
    assert re.search(r"largest relative difference, \S+, is \S+ times float32's epsilon", reason)
    assert_no_issue_link(c)
    issue = " ".join(c.text("ISSUE.md").split())
    assert "**This does not look like an XLA bug:** the program's own check" in issue
    assert "times float32's epsilon" in issue
    assert any(name.endswith(".jaxpr.txt") for name in c.names())


def test_ctrl_c_in_time_sleep_is_not_an_xla_bug(tmp_path: Path) -> None:
    out = tmp_path / "sleep.zip"
    argv = [XLA_BUGKIT, "collect", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / "sleep_hang.py")]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), cwd=tmp_path)  # fmt: skip
    assert child.stdout is not None
    for line in child.stdout:  # the program's own output, streamed by collect
        if line.strip() == "ready":  # jax has compiled and run; now it only sleeps
            break
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=600)
    c = Collected(child.returncode, stderr, out)
    assert c.returncode == 130, stderr
    assert f"{NOT_XLA}: the program was stopped by the user, and nothing in its" in stderr
    assert_no_issue_link(c)
    assert "XLA" not in c.manifest()["title"].split("(")[0]


def test_no_replay_claims_no_replay_result(bundles: Callable[..., Collected]) -> None:
    c = bundles("compile_crash", "--no-replay")
    assert c.returncode == 3, c.stderr
    issue = c.text("ISSUE.md")
    assert "did not reproduce" not in issue
    assert "The replay was skipped (`--no-replay`)" in issue
    assert "None: the replay was skipped (--no-replay)." in issue
    # XLA's CHECK points at XLA, but nothing outside the program showed it: no link yet,
    # no "XLA" in the title, and what would prove it.
    assert "unproven: XLA's CHECK at buffer_assignment_util.cc:46 failed" in c.stderr
    assert "To prove it: collect again without --no-replay" in c.stderr
    assert_no_issue_link(c)
    title = c.manifest()["title"]
    assert title.startswith("CPU compile crash: Check failed: const_"), title
    assert "(buffer_assignment_util.cc:46)" in title
    assert title.endswith(" (not shown to be XLA's yet)") and len(title) <= TITLE_MAX
    assert "**Not shown to be an XLA bug yet:** XLA's CHECK at" in issue
    # A compile crash ran nothing: no snapshot, so no claim of real inputs.
    assert c.manifest()["data"] == "no real inputs: XLA recorded no execution of the chosen modules"
    assert "inputs: real inputs" not in c.stderr


def test_log_tail_keeps_the_check_line_without_blank_lines(
    bundles: Callable[..., Collected],
) -> None:
    c = bundles("compile_crash")
    tail = c.text("ISSUE.md").split("lines of the program's output</summary>", 1)[1]
    tail = tail.split("</details>", 1)[0].strip().strip("`").removeprefix("text\n")
    lines = tail.strip("\n").splitlines()
    assert any("buffer_assignment_util.cc:46] Check failed" in line for line in lines)
    assert all(line.strip() for line in lines)
    assert not any("*** Check failure stack trace" in line for line in lines)
    assert "\n\n*** Check failure stack trace: ***" in c.text("log.txt")  # the log keeps all


def test_titles_and_sentences_say_what_happened(bundles: Callable[..., Collected]) -> None:
    crash = bundles("compile_crash")
    assert crash.manifest()["title"] == (
        "XLA CPU compile crash: Check failed: const_instr == nullptr (buffer_assignment_util.cc:46)"
    )
    assert "XLA crashes (SIGABRT) while compiling `jit(add_noise)`." in crash.text("ISSUE.md")
    # A 4 TiB result on a CPU machine with less memory: no allocator can give it there.
    runtime = bundles("runtime_error")
    if (proc.memory_and_swap() or 0) >= 1 << 42:  # pragma: no cover (a machine that has it)
        pytest.skip("this machine has 4 TiB of memory: the allocation may be XLA's to make")
    assert runtime.manifest()["title"] == (
        "RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes. (no sign of an XLA bug)"
    )
    assert (
        "**This does not look like an XLA bug:** XLA could not allocate 4,398,046,511,104 bytes "
        "in one piece, more than the "
    ) in runtime.text("ISSUE.md")
    for c in (crash, runtime):
        assert " a **" not in c.text("ISSUE.md")  # no "ends in a **interrupted**"


def test_source_is_off_by_default_and_said_so(bundles: Callable[..., Collected]) -> None:
    c = bundles("compile_crash")
    assert not any(n.startswith("source/") for n in c.names())
    assert "  source: not included (off by default; collect --include-source adds" in c.stderr


def test_include_source_ships_the_script_redacted_and_capped(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    script = project / "train_step.py"
    padding = "".join(f"# padding line {i:06d} {'.' * 60}\n" for i in range(4500))
    script.write_text(
        f"API_TOKEN = '{FAKE_TOKEN}'\n"
        + (PROGRAMS / "compile_error.py").read_text()
        + padding  # past the 256 kB cap
    )
    c = run_collect(tmp_path / "src.zip", [sys.executable, script.name], "--include-source",
                    cwd=project)  # fmt: skip
    assert c.returncode == 0, c.stderr
    shipped = c.text("source/train_step.py")
    assert FAKE_TOKEN not in shipped and shipped.startswith("API_TOKEN = '<REDACTED>'\n")
    assert "def train_step(w, x):" in shipped
    assert len(shipped.encode()) < 256 * 1024 + 200 < script.stat().st_size
    assert "more bytes not included ...]" in shipped.splitlines()[-1]
    notes = c.manifest()["notes"]
    assert "source/train_step.py holds only the first 256 kB of the script" in notes
    assert "  source: source/train_step.py (the program's script, redacted)" in c.stderr
    assert "attached as `source/train_step.py` (redacted)" in c.text("ISSUE.md")
    assert script.read_text().startswith(f"API_TOKEN = '{FAKE_TOKEN}'")  # the user's file


def test_include_source_without_a_script_says_why(tmp_path: Path) -> None:
    code = (PROGRAMS / "compile_error.py").read_text()
    c = run_collect(tmp_path / "inline.zip", [sys.executable, "-c", code], "--include-source",
                    "--no-replay", cwd=tmp_path)  # fmt: skip
    assert c.returncode == 3, c.stderr
    assert not any(n.startswith("source/") for n in c.names())
    assert "--include-source: the command names no .py or .sh script" in c.manifest()["notes"]
    assert "source: not included" not in c.stderr  # the note says it instead


def test_triage_reads_the_failure_record(bundles: Callable[..., Collected]) -> None:
    error = Failure.from_json(bundles("compile_error").manifest()["failure"])
    judged = triage(error, [])
    assert judged.xla and judged.reason == "XLA returned the status INTERNAL"
    crash = Failure.from_json(bundles("compile_crash").manifest()["failure"])
    assert triage(crash, []).reason == "XLA's CHECK at buffer_assignment_util.cc:46 failed"
    plain = Failure.from_json(bundles("value_error").manifest()["failure"])
    judged = triage(plain, [])
    assert not judged.xla and judged.reason.endswith("no replay ran to show otherwise")
