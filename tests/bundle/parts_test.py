"""Which part of a job a merged bundle is judged by, and what it says of the others (no jax:
the parts' manifests as collect writes them; the end-to-end jobs are in
tests/collecting/merge_test.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from xla_bugkit.bundle import job_text, stitched_replay
from xla_bugkit.bundle.manifest.integrity import OpenBundle
from xla_bugkit.bundle.merge import _exit_code, default_output
from xla_bugkit.bundle.parts import Part, _placed, choose, job_size
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.failure.classify import classify

PEER = "task 1 of the job stopped sending heartbeats (it failed, was preempted or was killed)"
# Real outputs of processes a job ended (tests/failure/peers_test.py reads each).
EXCERPTS = Path(__file__).parents[1] / "failure" / "data" / "peers"


def _survivor(excerpt: str, *, before_peers_were_known: bool = False) -> dict[str, Any]:
    """The failure collect records for the process that printed ``excerpt``; with
    ``before_peers_were_known``, as a bundle of an earlier version recorded it: no ``peer``,
    the headline its own words (the job's transport or the JAX client's abort)."""
    failure = classify((EXCERPTS / excerpt).read_text(), exit_status=-6).to_json()
    assert failure["peer"], excerpt
    return {**failure, "peer": None} if before_peers_were_known else failure


def _part(
    index: int,
    kind: str,
    ended: str,
    *,
    reproduced: bool = False,
    flags: tuple[str, ...] = (),
    jaxlib: str = "0.10.2",
    failure: dict[str, Any] | None = None,
    parts: int | None = 4,
    processes: int = 4,
    **said: str | None,
) -> Part:
    """Part ``index`` of a job; ``failure``: its record as collect wrote it, if not the
    plain one of ``kind`` with what is ``said`` (its ``peer``, ``signal``, ``site``);
    ``parts``: the job record's size, ``processes``: the process's."""
    failure = failure or {"kind": kind, "headline": f"{kind} of part {index}", "peer": None,
                          "signal": None, "site": None, **said}  # fmt: skip
    outcome = "reproduced: crash" if reproduced else "not reproduced"
    manifest: Any = {
        "created": "2026-12-06T10:00:00+00:00",
        "failure": failure,
        "modules": [
            {
                "label": f"module_0010.jit_step_{index}",
                "platform": "cpu",
                "replay": {"outcome": outcome},
            }
        ],
        "versions": {"jax": "0.10.2", "jaxlib": jaxlib},
        "xla_flags": ["--xla_force_host_platform_device_count=2", *flags],
        "exit_status": -6,
        "job": {
            "part": index,
            "parts": parts,
            "from": "SLURM_PROCID",
            "ended": ended,
            "host": "h",
        },
        "process": {"rank": index, "processes": processes, "devices": 8},
    }
    bundle = OpenBundle(Path(f"bundle.part-{index}-of-4.zip"), Path("."), manifest, ())
    return Part(index, bundle)


def test_an_xla_crash_outweighs_a_wrong_result_a_hang_and_the_processes_taken_down() -> None:
    parts = [
        _part(0, "process crash", "2026-12-06T10:00:01.000+00:00", peer=PEER, signal="SIGABRT"),
        _part(1, "hang", "2026-12-06T10:00:00.500+00:00"),
        _part(
            2,
            "compile crash",
            "2026-12-06T10:00:02.000+00:00",
            signal="SIGABRT",
            site="buffer_assignment_util.cc:46",
            reproduced=True,
        ),
        _part(3, "wrong result", "2026-12-06T10:00:00.100+00:00", reproduced=True),
    ]
    assert choose(parts).index == 2
    assert choose([parts[0], parts[1], parts[3]]).index == 3
    assert choose([parts[0], parts[1]]).index == 1
    # A process a launcher stopped from outside (SIGTERM, no line of XLA's) was taken down.
    stopped = _part(1, "process crash", "2026-12-06T10:00:00.000+00:00", signal="SIGTERM")
    assert stopped.taken_down
    assert choose([stopped, parts[3]]).index == 3


def test_among_equals_the_reproduced_then_the_first_to_stop() -> None:
    late = _part(0, "compile crash", "2026-12-06T10:00:09.000+00:00", reproduced=True)
    early = _part(1, "compile crash", "2026-12-06T10:00:01.000+00:00", reproduced=True)
    unproven = _part(2, "compile crash", "2026-12-06T10:00:00.000+00:00")
    assert choose([late, early, unproven]).index == 1
    lines = job_text.summary_lines([late, early, unproven], early, 4, Path("b.zip"), 10)
    assert "part 1 failed first of 3 parts that failed this way" in lines[0]
    # Times from the first part to stop, the unproven one.
    assert any(line.startswith("   part 2 (10:00:00.000 UTC)") for line in lines)
    assert any(line.startswith(" * part 1 (+1.0 s)") for line in lines)


def test_the_job_section_names_the_topology_the_others_and_what_differs() -> None:
    own = ("--xla_disable_hlo_passes=copy-insertion",)
    crashed = _part(2, "compile crash", "2026-12-06T10:00:01.000+00:00", signal="SIGABRT",
                    reproduced=True, flags=own)  # fmt: skip
    others = [
        _part(i, "process crash", "2026-12-06T10:01:40.000+00:00", peer=PEER, jaxlib="0.10.1")
        for i in (0, 1)
    ]
    parts = [*others, crashed]
    same = {(0, "module_0010.jit_step_0"): "module_0010.jit_step_2 of part 2"}
    section = job_text.issue_section(parts, crashed, 4, same)
    assert "4 processes on 1 machine, 2 devices each (8 in all)" in section
    assert "merges 3 of its 4 parts. Missing: part 3 (a part whose program did not fail" in section
    assert "**Part 2 failed inside XLA**" in section
    assert "| 0 | taken down by the job: task 1 of the job" in section and "+99.0 s" in section
    assert "(the same module as module_0010.jit_step_2 of part 2)" in section
    assert "Part 0 compiled the same module (`module_0010.jit_step_2`" in section
    assert "- jaxlib: part 0: 0.10.1, part 1: 0.10.1, part 2: 0.10.2" in section
    assert "part 2 adds `--xla_disable_hlo_passes=copy-insertion` (parts 0, 1: none)" in section
    assert "runs it on 8 CPU devices of one process" in section
    report = "### Description\n\nx\n\n**Command** (redacted):\n"
    merged = job_text.with_section(report, section)
    assert merged.index("### The job") < merged.index("**Command**")


def test_parts_that_claim_one_place_or_come_from_other_jobs_are_refused() -> None:
    a, b = _part(1, "hang", "t"), _part(1, "hang", "t")
    with pytest.raises(BugkitError, match="are both part 1"):
        _placed([a.bundle, b.bundle])
    other: Any = {**_part(2, "hang", "t").manifest}
    other["job"] = {**other["job"], "parts": 8}
    with pytest.raises(BugkitError, match="jobs of different sizes"):
        _placed([a.bundle, OpenBundle(Path("x.zip"), Path("."), other, ())])
    beyond: Any = {**_part(2, "hang", "t").manifest}
    beyond["job"] = {**beyond["job"], "part": 4}
    with pytest.raises(BugkitError, match="says it is part 4 of 4: no such part"):
        _placed([a.bundle, OpenBundle(Path("z.zip"), Path("."), beyond, ())])
    nameless: Any = {**_part(0, "hang", "t").manifest, "process": {"rank": None}}
    del nameless["job"]
    with pytest.raises(BugkitError, match="does not say which part"):
        _placed([a.bundle, OpenBundle(Path("y.zip"), Path("."), nameless, ())])


def test_the_default_output_drops_the_part_from_the_name() -> None:
    assert default_output([Path("run/bundle.part-3-of-8.zip")]) == Path("run/bundle.zip")
    assert default_output([Path("b.part-0.tar.gz")]) == Path("b.tar.gz")
    assert default_output([Path("mine.zip")]) == Path("merged-mine.zip")


def _as_its_own(part: Part) -> stitched_replay.Rejudged:
    """What merge stands by where it stitched no inputs: the part's own verdicts."""
    return stitched_replay.Rejudged(modules=list(part.manifest["modules"]), title="")


def test_a_proven_wrong_result_outranks_the_parts_the_job_ended() -> None:
    """A job of 4 (jax.distributed, gloo): process 0's own check found a wrong value, which
    its replay proved; the others lost their gloo connection to it, or were aborted at
    jax.distributed's shutdown, one of them in a bundle from before such words were known."""
    wrong = _part(0, "wrong result", "2026-12-06T10:00:00.000+00:00", reproduced=True)
    lost = _part(1, "", "2026-12-06T10:00:00.200+00:00",
                 failure=_survivor("gloo_all_reduce_closed_by_peer.txt"))  # fmt: skip
    aborted = _part(2, "", "2026-12-06T10:00:00.100+00:00",
                    failure=_survivor("service_leader_gone.txt"))  # fmt: skip
    older = _part(3, "", "2026-12-06T09:59:59.000+00:00",
                  failure=_survivor("gloo_all_reduce_closed_by_peer.txt",
                                    before_peers_were_known=True))  # fmt: skip
    parts = [wrong, lost, aborted, older]
    assert older.failure["kind"] == "runtime error" and older.taken_down
    assert choose(parts) is wrong and _exit_code(wrong, _as_its_own(wrong)) is ExitCode.OK
    lines = job_text.summary_lines(parts, wrong, 4, Path("b.zip"), 10)
    # The parts the job ended are not counted among those that failed inside XLA.
    assert "part 0 failed inside XLA" in lines[0], lines[0]
    assert any(
        line.startswith("   part 1 ") and "taken down by the job: a collective lost its" in line
        for line in lines
    )
    assert any(
        line.startswith("   part 3 ") and "taken down by the job: a collective lost its" in line
        for line in lines
    )
    note = job_text.merged_note(parts, wrong, 4)
    assert note.endswith("judged by part 0: wrong result"), note
    # Alone, the parts the job ended are judged by the first to stop, and say so.
    assert choose([lost, aborted, older]) is older
    assert _exit_code(older, _as_its_own(older)) is ExitCode.NOT_REPRODUCED
    assert "the job took it down" in job_text.summary_lines([lost, older], older, 4,
                                                            Path("b.zip"), 10)[0]  # fmt: skip


def test_proof_outranks_words_and_the_job_ended_part_ranks_below_every_own_failure() -> None:
    proven = _part(0, "non-XLA failure", "2026-12-06T10:00:05.000+00:00", reproduced=True)
    unproven = _part(1, "runtime error", "2026-12-06T10:00:00.000+00:00")
    assert choose([unproven, proven]) is proven
    lost = _part(2, "", "2026-12-06T09:00:00.000+00:00",
                 failure=_survivor("gloo_enforce_data_size.txt"))  # fmt: skip
    hang = _part(3, "hang", "2026-12-06T10:00:09.000+00:00")
    interrupted = _part(3, "interrupted", "2026-12-06T10:00:09.000+00:00")
    finished = _part(1, "success", "2026-12-06T08:00:00.000+00:00")
    assert choose([lost, hang]) is hang
    assert choose([lost, interrupted]) is interrupted
    # A part with no failure says less than one the job ended.
    assert choose([finished, lost]) is lost


def test_the_jobs_size_comes_from_the_parts_not_the_process_count_read_before_it_started() -> None:
    parts = [_part(i, "hang", f"2026-12-06T10:00:0{i}.000+00:00", processes=1) for i in (0, 1)]
    lines = job_text.summary_lines(parts, parts[0], 4, Path("b.zip"), 10)
    assert lines[0].startswith("xla-bugkit: a job of 4 processes on 1 machine, 2 devices each")
    # No size in the job record: the part's name says it (bundle.part-1-of-4.zip).
    nameless = _part(1, "hang", "t", parts=None, processes=1)
    assert job_size(nameless.bundle) == 4
    single = [_part(0, "hang", "t", parts=1, processes=1)]
    assert (
        "a job of 1 process on 1 machine"
        in job_text.summary_lines(single, single[0], 1, Path("b.zip"), 10)[0]
    )
