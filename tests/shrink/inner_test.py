"""Edits inside called computations, on HLO text as jaxlib 0.10.2 prints it (parsable)."""

from __future__ import annotations

from xla_bugkit.shrink import hlo_text, inner
from xla_bugkit.shrink.hlo_text import Source

# The shape of jax.random's code: the entry calls a function that runs a while loop, whose
# body calls another function; the body carries a state element it never changes.
MODULE = """HloModule jit_g, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

step.1 {
  a.1 = f32[4]{0} parameter(0)
  b.1 = f32[4]{0} parameter(1)
  s.1 = f32[4]{0} sine(a.1)
  ROOT m.1 = f32[4]{0} multiply(s.1, b.1)
}

body.1 {
  t.1 = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  i.1 = s32[] get-tuple-element(t.1), index=0
  one.1 = s32[] constant(1)
  n.1 = s32[] add(i.1, one.1)
  x.2 = f32[4]{0} get-tuple-element(t.1), index=1
  w.2 = f32[4]{0} get-tuple-element(t.1), index=2
  unused.1 = f32[4]{0} cosine(x.2)
  c.1 = f32[4]{0} call(x.2, w.2), to_apply=step.1
  ROOT r.1 = (s32[], f32[4]{0}, f32[4]{0}) tuple(n.1, c.1, w.2)
}

cond.1 {
  t.2 = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  i.2 = s32[] get-tuple-element(t.2), index=0
  k.1 = s32[] constant(3)
  ROOT lt.1 = pred[] compare(i.2, k.1), direction=LT
}

loop.1 {
  p.1 = f32[4]{0} parameter(0)
  z.1 = s32[] constant(0)
  init.1 = (s32[], f32[4]{0}, f32[4]{0}) tuple(z.1, p.1, p.1)
  w.1 = (s32[], f32[4]{0}, f32[4]{0}) while(init.1), condition=cond.1, body=body.1
  ROOT out.1 = f32[4]{0} get-tuple-element(w.1), index=1
}

ENTRY main.1 {
  x.1 = f32[4]{0} parameter(0)
  l.1 = f32[4]{0} call(x.1), to_apply=loop.1
  ROOT e.1 = f32[4]{0} exponential(l.1)
}
"""


def _body(c: hlo_text.Candidate, name: str) -> list[str]:
    return [i.line for i in inner.instructions(c, name)]


def test_calls_are_inlined_with_fresh_names_and_the_call_keeps_its_name() -> None:
    c = hlo_text.parse(MODULE)
    assert inner.call_sites(c) == [("main.1", "l.1"), ("body.1", "c.1")]
    flat = inner.inline_all(c)
    assert flat.reached() == ["body.1", "cond.1"]  # loop.1 and step.1 are gone
    entry = {i.name: i for i in flat.entry}
    # Inlined names are new ones (w.3: w.1 and w.2 were taken), in the form base.N.
    assert entry["l.1"].line == "l.1 = f32[4]{0} get-tuple-element(w.3), index=1"
    assert entry["w.3"].opcode == "while"
    assert entry[entry["w.3"].operands[0]].opcode == "tuple"
    assert flat.sources == (Source(index=0),)
    body = _body(flat, "body.1")
    # The callee's root takes the call's name; its parameters become the call's operands.
    assert "c.1 = f32[4]{0} multiply(s.2, w.2)" in body
    assert "s.2 = f32[4]{0} sine(x.2)" in body
    assert flat.instruction_count() < c.instruction_count()


def test_dead_code_goes_but_a_called_computation_keeps_its_parameters() -> None:
    c = inner.dead_code(hlo_text.parse(MODULE), "body.1")
    body = _body(c, "body.1")
    assert not any(line.startswith("unused.1") for line in body)
    assert body[0].startswith("t.1 = ")
    step = inner.dead_code(inner.replace_uses(c, "step.1", "m.1", "b.1"), "step.1")
    # b.1 is the root now; a.1 is no longer used but stays: it is the signature.
    assert _body(step, "step.1") == ["a.1 = f32[4]{0} parameter(0)", "b.1 = f32[4]{0} parameter(1)"]
    assert next(i for i in inner.instructions(step, "step.1") if i.is_root).name == "b.1"


def test_stand_ins_have_the_shape_and_never_depend_on_the_target() -> None:
    c = hlo_text.parse(MODULE)
    c1 = next(i for i in inner.instructions(c, "body.1") if i.name == "c.1")
    assert inner.stand_ins(c, "body.1", c1) == ["x.2", "w.2"]
    edited = inner.replace_uses(c, "body.1", "c.1", "x.2")
    root = next(i for i in inner.instructions(edited, "body.1") if i.is_root)
    assert root.operands == ("n.1", "x.2", "w.2")
    assert "step.1" not in edited.reached()


def test_zeros_are_a_broadcast_scalar_with_a_fresh_name() -> None:
    c = hlo_text.parse(MODULE)
    z = inner.zeros(c, "step.1", "m.1")
    assert z is not None
    assert _body(z, "step.1")[-2:] == [
        "constant.1 = f32[] constant(0)",
        "m.1 = f32[4] broadcast(constant.1), dimensions={}",
    ]
    assert inner.zeros(c, "loop.1", "w.1") is None  # a tuple has no zeros of its own


def test_an_element_of_a_tuple_reads_the_operand_directly() -> None:
    flat = inner.forward_tuples(inner.inline_all(hlo_text.parse(MODULE)))
    assert flat.root.operands == ("l.1",)
    entry = {i.name: i for i in flat.entry}
    assert entry["l.1"].opcode == "get-tuple-element"  # a while's result is no tuple instr
    c = hlo_text.parse(MODULE)
    forwarded = inner.forward_tuples(inner.replace_uses(c, "loop.1", "w.1", "init.1"))
    # out.1 read element 1 of the tuple init.1: it is p.1 now, and the root moved to it.
    assert [i.name for i in inner.instructions(forwarded, "loop.1")] == ["p.1"]
    assert "body.1" not in forwarded.reached()


def test_every_edit_keeps_operands_before_their_users() -> None:
    c = inner.inline_all(hlo_text.parse(MODULE))
    for computation in inner.computations(c):
        seen: set[str] = set()
        for i in inner.instructions(c, computation):
            assert all(o in seen for o in i.operands), i.line
            seen.add(i.name)


def test_what_decides_a_loops_trip_count_is_never_edited() -> None:
    control = inner.loop_control(hlo_text.parse(MODULE))
    assert control["cond.1"] == {"t.2", "i.2", "k.1", "lt.1"}
    # The condition reads element 0: the body's counter and what computes it.
    assert control["body.1"] == {"n.1", "i.1", "one.1", "t.1"}
