"""Entry-computation edits on HLO text as jaxlib 0.10.2 prints it (parsable, no metadata)."""

from __future__ import annotations

from xla_bugkit.shrink import hlo_text
from xla_bugkit.shrink.hlo_text import Source

# Printed by jaxlib's short_parsable printer for a jitted ``log(exp(x * y)) + sum(x)``.
HEADER = "HloModule jit_f, entry_computation_layout={(f32[4,8]{1,0}, f32[4,8]{1,0})->f32[4,8]{1,0}}"
MODULE = (
    HEADER
    + """

region_0.1 {
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT add.1 = f32[] add(a.1, b.1)
}

ENTRY main.2 {
  x.1 = f32[4,8]{1,0} parameter(0)
  y.1 = f32[4,8]{1,0} parameter(1)
  mul.1 = f32[4,8]{1,0} multiply(x.1, y.1)
  exp.1 = f32[4,8]{1,0} exponential(mul.1)
  log.1 = f32[4,8]{1,0} log(exp.1)
  zero.1 = f32[] constant(0)
  sum.1 = f32[4]{0} reduce(x.1, zero.1), dimensions={1}, to_apply=region_0.1
  b.2 = f32[4,8]{1,0} broadcast(sum.1), dimensions={0}
  ROOT add.2 = f32[4,8]{1,0} add(log.1, b.2)
}
"""
)


def test_parse_reads_the_entry_and_drops_the_entry_layout() -> None:
    c = hlo_text.parse(MODULE)
    assert c.header == "HloModule jit_f"
    assert c.root.name == "add.2"
    assert c.sources == (Source(index=0), Source(index=1))
    assert c.instruction_count() == 9 + 3


def test_a_moved_root_drops_dead_code_and_unused_parameters() -> None:
    c = hlo_text.with_root(hlo_text.parse(MODULE), "sum.1")
    assert [i.name for i in c.entry] == ["x.1", "zero.1", "sum.1"]
    assert c.sources == (Source(index=0),)
    assert "region_0.1" in c.text()
    assert "ROOT sum.1" in c.text()


def test_a_cut_becomes_a_new_parameter_and_numbers_stay_contiguous() -> None:
    c = hlo_text.with_root(hlo_text.parse(MODULE), "log.1")
    c = hlo_text.cut(c, "mul.1")
    text = c.text()
    # x.1 and y.1 died with mul.1's cone; the cut is parameter 0, without its layout.
    assert "mul.1 = f32[4,8] parameter(0)" in text
    assert "x.1" not in text and "y.1" not in text
    assert c.sources == (Source(value="mul.1"),)
    assert "region_0.1" not in text  # no longer reached
    assert c.instruction_count() == 3


def test_a_cut_keeps_the_surviving_parameters_in_order() -> None:
    c = hlo_text.cut(hlo_text.parse(MODULE), "exp.1")
    params = [i.line for i in c.entry if i.opcode == "parameter"]
    assert params == [
        "x.1 = f32[4,8]{1,0} parameter(0)",
        "exp.1 = f32[4,8] parameter(1)",
    ]
    assert c.sources == (Source(index=0), Source(value="exp.1"))


def test_a_bypass_renames_uses_exactly() -> None:
    c = hlo_text.with_root(hlo_text.parse(MODULE), "log.1")
    c = hlo_text.bypass(c, "exp.1", "mul.1")
    log = next(i for i in c.entry if i.name == "log.1")
    assert log.operands == ("mul.1",)
    assert log.line == "log.1 = f32[4,8]{1,0} log(mul.1)"


def test_bypassing_the_root_moves_it_to_the_operand() -> None:
    c = hlo_text.with_root(hlo_text.parse(MODULE), "log.1")
    c = hlo_text.bypass(c, "log.1", "exp.1")
    assert c.root.name == "exp.1"


def test_only_arrays_are_cut() -> None:
    tuple_line = hlo_text.parse(MODULE).entry[0]
    assert hlo_text.is_array(tuple_line)
    assert hlo_text.plain_shape("f32[4,8]{1,0}") == "f32[4,8]"
    assert hlo_text.plain_shape("pred[]") == "pred[]"
