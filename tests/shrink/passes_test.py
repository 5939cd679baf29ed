"""Reading the pass trace XLA logs with TF_CPP_VMODULE=hlo_pass_pipeline=2 (jaxlib 0.10.2)."""

from __future__ import annotations

from xla_bugkit.shrink.passes import Culprit, read_trace

_P = "I1202 23:03:39.209124    6368 hlo_pass_pipeline.cc"
# Lines as XLA prints them (trimmed): a pass starts, the module hash before it, its end.
LOG = f"""{_P}:303] Running HLO pass pipeline on module jit__lambda: simplification
{_P}:181]   HLO pass dce
{_P}:185]   Module hash 111
{_P}:176] HLO pass: dce time: 8 us (8 us) (cumulative: 32 us, max: 16 us, #called: 3)
{_P}:181]   HLO pass algsimp
{_P}:185]   Module hash 111
{_P}:176] HLO pass: algsimp time: 35 us (35 us) (cumulative: 535 us, max: 35 us, #called: 56)
{_P}:181]   HLO pass fusion
{_P}:185]   Module hash 222
{_P}:176] HLO pass: fusion time: 8 us (8 us) (cumulative: 40 us, max: 16 us, #called: 4)
{_P}:181]   HLO pass copy-insertion
{_P}:185]   Module hash 222
"""


def test_the_trace_names_changed_passes_and_the_unfinished_one() -> None:
    trace = read_trace(LOG)
    assert trace.passes == ("dce", "algsimp", "fusion", "copy-insertion")
    assert trace.changed == ("algsimp",)  # the hash moved between algsimp and fusion
    assert trace.unfinished == "copy-insertion"


def test_a_finished_compile_has_no_unfinished_pass() -> None:
    finished = LOG + f"{_P}:176] HLO pass: copy-insertion time: 8 us (8 us)\n"
    assert read_trace(finished).unfinished is None


def test_the_wording_is_honest() -> None:
    assert Culprit("algsimp", "crash-inside").sentence().startswith("crash inside HLO pass")
    hides = Culprit("fusion", "disabling-hides").sentence()
    assert "not proof that fusion is at fault" in hides
    assert Culprit(None, "not-a-pass").sentence().startswith("not an HLO pass")
