"""signature: one bug across XLA builds, read from real fatal lines of several releases.

Each excerpt is a line XLA printed (where it came from is beside it). What another build of
the same XLA prints for the same CHECK differs only in what the build put around it: the
line number (code added above it), the source path (a checkout, bazel-out, Bazel modules'
``external/xla+``), the log prefix (time, thread id), the pointers CHECK_EQ prints. Such a
line is the same bug; a different condition in the same file, or the same condition in
another file, is not.
"""

from __future__ import annotations

import re

import pytest

from xla_bugkit.failure.classify import Failure, classify
from xla_bugkit.failure.signature import comparable

# (where the line was seen, the fatal line as printed)
CHECKS = [
    (  # tests/programs/compile_crash.py under jaxlib 0.10.2 (CPU)
        "jaxlib 0.10.2",
        "F1206 09:49:08.829582    1892 buffer_assignment_util.cc:46] Check failed: "
        "const_instr == nullptr ",
    ),
    (  # openxla/xla#47376, absl's log of 2026 (its own HLO runner)
        "openxla/xla#47376",
        "F0000 00:00:1786848211.450142 3821845 shape.h:852] Check failed: buffer != nullptr "
        "((null) vs. (null))",
    ),
    (  # openxla/xla#47370
        "openxla/xla#47370",
        "F0000 00:00:1786848421.425461 3829339 ir_emitter.cc:3562] Check failed: "
        "1 == assigned_buffers.size() (1 vs. 2)",
    ),
    (  # jax-ml/jax#17730, jaxlib 0.4.24 (TensorFlow's dated log format)
        "jax#17730 (0.4.24)",
        "2024-02-27 16:32:33.075782: F external/xla/xla/service/gpu/nvptx_compiler.cc:614] "
        "Check failed: options.is_autotuning_compilation ",
    ),
    (  # marin-community/marin#1921, glog of 2024
        "marin#1921",
        "F0912 11:59:01.941641  741969 shape_tree.cc:54] Check failed: "
        "result->children_start_id >= 0 (-1 vs. 0)",
    ),
]

# A RET_CHECK reaches Python as a status: jax-ml/jax#22484 (jaxlib 0.4.30).
RET_CHECK = (
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RET_CHECK failure "
    "(external/xla/xla/service/cpu/ir_emitter.cc:1144) "
    "LayoutUtil::IsMonotonicWithDim0Major(operand->shape().layout())"
)

_SITE = re.compile(r"(?P<path>[\w./+~-]*?)(?P<file>[\w.-]+\.(?:cc|h)):(?P<line>\d+)\]")


def moved(line: str, *, by: int, path: str, prefix: str) -> str:
    """``line`` as another build prints it: the CHECK ``by`` lines further down its file,
    under ``path``, logged with ``prefix`` (time and thread id)."""
    site = _SITE.search(line)
    assert site is not None, line
    where = f"{path}{site['file']}:{int(site['line']) + by}]"
    return f"{prefix}{where}{line[site.end() :]}"


def crash(output: str) -> Failure:
    return classify(output, exit_status=-6)


# The builds another release's CHECK comes from: absl's and glog's prefixes, the paths of a
# WORKSPACE build, of bazel-out under /proc/self/cwd, and of a Bazel modules build.
BUILDS = [
    ("F0000 00:00:1733490011.123456   12345 ", "external/xla/xla/service/", 2),
    ("F1206 10:11:12.345678 67890 ", "/proc/self/cwd/external/xla/xla/service/", -7),
    ("2025-03-01 08:00:00.000001: F ", "bazel-out/k8-opt/bin/external/xla/xla/", 120),
    ("F0000 00:00:1790000000.000001 4242 ", "external/xla+/xla/service/cpu/", 9999),
]


@pytest.mark.parametrize(("seen", "line"), CHECKS, ids=[seen for seen, _ in CHECKS])
@pytest.mark.parametrize(("prefix", "path", "by"), BUILDS, ids=["absl", "cwd", "tf", "bzlmod"])
def test_a_check_whose_line_path_and_prefix_moved_is_the_same_bug(
    seen: str, line: str, prefix: str, path: str, by: int
) -> None:
    run = crash(line)
    other = crash(moved(line, by=by, path=path, prefix=prefix))
    assert other.site is not None and run.site is not None
    assert other.site.split(":")[0] == run.site.split(":")[0]  # the basename, as printed
    assert other.site != run.site  # the line moved
    assert run.same_bug(other) and other.same_bug(run), (run.signature, other.signature)


@pytest.mark.parametrize(("seen", "line"), CHECKS, ids=[seen for seen, _ in CHECKS])
def test_another_check_in_the_same_file_is_another_bug(seen: str, line: str) -> None:
    run = crash(line)
    condition = line.index("Check failed: ") + len("Check failed: ")
    other = crash(f"{line[:condition]}instr->IsRoot() ")
    assert other.site == run.site
    assert not run.same_bug(other)


@pytest.mark.parametrize(("seen", "line"), CHECKS, ids=[seen for seen, _ in CHECKS])
def test_the_same_condition_in_another_file_is_another_bug(seen: str, line: str) -> None:
    run = crash(line)
    site = _SITE.search(line)
    assert site is not None
    other = crash(line.replace(f"{site['file']}:", "hlo_verifier.cc:"))
    assert not run.same_bug(other)


def test_a_ret_check_whose_line_moved_under_a_bazel_out_path_is_the_same_bug() -> None:
    run = classify(RET_CHECK, exit_status=1)
    newer = RET_CHECK.replace(
        "(external/xla/", "(/proc/self/cwd/bazel-out/k8-opt/bin/external/xla/"
    )
    newer = newer.replace("ir_emitter.cc:1144)", "ir_emitter.cc:11044)")
    other = classify(
        newer.replace("jaxlib.xla_extension.XlaRuntimeError", "jax.errors.JaxRuntimeError"),
        exit_status=1,
    )
    assert run.same_bug(other) and other.same_bug(run), (run.signature, other.signature)
    elsewhere = classify(RET_CHECK.replace("ir_emitter.cc", "ir_emitter2.cc"), exit_status=1)
    assert not run.same_bug(elsewhere)


def test_a_signature_an_earlier_version_recorded_still_compares() -> None:
    """A bundle written before the path was taken off ahead of the numbers recorded a long
    line number as "N" and kept an absolute path: it still meets the line as printed now."""
    path = "/proc/self/cwd/external/xla/xla/service/cpu/"
    recorded = f"INTERNAL: RET_CHECK failure ({path}ir_emitter.cc:N) x"
    now = "INTERNAL: RET_CHECK failure (ir_emitter.cc:1144) x"
    assert comparable(recorded) == comparable(now)


def test_the_signature_keeps_the_line_it_was_printed_with() -> None:
    """Only the comparison leaves the line out: the recorded signature still says where."""
    failure = crash(
        moved(CHECKS[0][1], by=2, path="external/xla/xla/service/", prefix=BUILDS[0][0])
    )
    assert failure.signature == "buffer_assignment_util.cc:48] Check failed: const_instr == nullptr"
