"""Host callbacks that only print are left out of a replay; those whose results the module
reads keep it from replaying."""

from __future__ import annotations

from xla_bugkit.replay.child.replayable import without_print_callbacks

# As XLA dumps it (names with %) and as jaxlib prints a module it read (without).
DUMPED = """\
ENTRY %main.2 (x.1: f32[4]) -> f32[4] {
  %x.1 = f32[4]{0} parameter(0)
  %reduce_sum.7 = f32[] reduce(%x.1, %c), dimensions={0}, to_apply=%sum
  %debug_print.1 = () custom-call(%reduce_sum.7), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, metadata={op_type="debug_print"}
  %mul.1 = f32[4]{0} multiply(%x.1, %x.1)
  ROOT %add.1 = f32[4]{0} add(%mul.1, %x.1)
}
"""  # noqa: E501
USED = """\
ENTRY main.2 {
  x.1 = f32[4]{0} parameter(0)
  pure_callback.1 = () custom-call(x.1), custom_call_target="xla_ffi_python_cpu_callback"
  io_callback.2 = (f32[4]{0}) custom-call(x.1), custom_call_target="xla_ffi_python_cpu_callback"
  gte.3 = f32[4]{0} get-tuple-element(io_callback.2), index=0
  ROOT t = ((), f32[4]{0}) tuple(pure_callback.1, gte.3)
}
"""


def test_a_print_only_callback_is_left_out_of_the_module() -> None:
    text, dropped = without_print_callbacks(DUMPED)
    assert dropped == 1
    assert "debug_print" not in text and "ROOT %add.1" in text
    jaxlib_printed = DUMPED.replace("%", "")
    assert without_print_callbacks(jaxlib_printed)[1] == 1


def test_a_callback_whose_result_is_read_stays() -> None:
    text, dropped = without_print_callbacks(USED)
    assert (text, dropped) == (USED, 0)
