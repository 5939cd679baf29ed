"""Op-by-op reference: the text splitting, the tiny modules, and real runs through jaxlib."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_bugkit import jaxlib_adapter
from xla_bugkit.hlo import parser
from xla_bugkit.replay import extreme, protocol
from xla_bugkit.replay.child import opbyop
from xla_bugkit.replay.compare import compare_outputs

pytestmark = pytest.mark.jax  # real jax programs, replay children or jax itself

jax.config.update("jax_platforms", "cpu")

TEXT = """\
HloModule m, entry_computation_layout={(f32[3]{0}, s32[])->(f32[3]{0}, s32[])}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[3]{0} parameter(0)
  n = s32[] parameter(1)
  t = (f32[3]{0}, s32[]) tuple(x, n)
  g = f32[3]{0} get-tuple-element(t), index=0
  z = f32[] constant(0)
  r = f32[] reduce(g, z), dimensions={0}, to_apply=add
  b = f32[3]{0} broadcast(r), dimensions={}
  m = f32[3]{0} multiply(b, b)
  ROOT out = (f32[3]{0}, s32[]) tuple(m, n)
}
"""


def test_parse_shape_nests_tuples_and_keeps_layouts() -> None:
    assert parser.parse_shape("f32[3,4]{1,0}") == "f32[3,4]{1,0}"
    assert parser.parse_shape("(f32[2]{0}, (s32[], pred[]))") == [
        "f32[2]{0}",
        ["s32[]", "pred[]"],
    ]
    assert parser.parse_shape("()") == []


def test_parse_module_reads_entry_instructions() -> None:
    module = parser.parse_module(TEXT)
    names = [i.name for i in module.entry]
    assert names == ["x", "n", "t", "g", "z", "r", "b", "m", "out"]
    reduce = module.entry[5]
    assert reduce.opcode == "reduce"
    assert reduce.operands == ("g", "z")
    assert module.entry[4].operands == ()  # a constant's literal is no operand
    assert module.entry[7].operands == ("b", "b")
    assert module.entry[-1].is_root
    assert set(module.computations) == {"add", "main"}


def test_tiny_module_copies_callees_and_declares_operands_once() -> None:
    module = parser.parse_module(TEXT)
    shapes = {i.name: i.shape for i in module.entry}
    text = opbyop.tiny_module(module, module.entry[5], shapes)
    assert "add {" in text
    assert "g = f32[3]{0} parameter(0)" in text
    assert "z = f32[] parameter(1)" in text
    square = opbyop.tiny_module(module, module.entry[7], shapes)
    assert square.count("parameter(") == 1


def test_tuple_operands_are_passed_as_leaves_and_rebuilt() -> None:
    lines = opbyop._parameter_lines("t", ["f32[]", ["s32[2]{0}", "pred[]"]], [0])
    assert "  t.bk1.bk0 = s32[2]{0} parameter(1)" in lines
    assert lines[-1] == "  t = (f32[], (s32[2]{0}, pred[])) tuple(t.bk0, t.bk1)"


def test_hand_written_module_runs_op_by_op() -> None:
    text = jaxlib_adapter.module_text(jaxlib_adapter.hlo_text_to_module_bytes(TEXT))
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = opbyop.run_op_by_op(text, [x, np.int32(7)], opbyop.compile_and_run("cpu"))
    assert compare_outputs(out, [np.full(3, 36.0, np.float32), np.int32(7)]).close


def _jitted_text(f: object, *args: object) -> str:
    lowered = jax.jit(f).lower(*args)  # type: ignore[arg-type]
    hlo = lowered.as_text(dialect="hlo")
    return jaxlib_adapter.module_text(jaxlib_adapter.hlo_text_to_module_bytes(hlo))


def test_real_jax_program_with_loop_and_calls_agrees_with_jit() -> None:
    def f(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        def body(i: jax.Array, c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            a, b = c
            return a * 0.5 + jnp.tanh(b), b + i

        a, b = jax.lax.fori_loop(0, 3, body, (x, jnp.float32(1.0)))
        return jnp.sin(a) @ y + jnp.sum(x) + jnp.argmax(x), b

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = np.arange(8, dtype=np.float32).reshape(4, 2)
    text = _jitted_text(f, x, y)
    assert "while(" in text and "to_apply=" in text
    out = opbyop.run_op_by_op(text, [x, y], opbyop.compile_and_run("cpu"))
    expected = [np.asarray(v) for v in jax.jit(f)(x, y)]
    assert compare_outputs(out, expected).close


def test_an_instruction_that_cannot_run_alone_is_named() -> None:
    def fail(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
        raise RuntimeError("boom")

    text = jaxlib_adapter.module_text(jaxlib_adapter.hlo_text_to_module_bytes(TEXT))
    with pytest.raises(opbyop.OpByOpError, match=r"^z \(constant\) fails alone: boom"):
        opbyop.run_op_by_op(text, [np.zeros(3, np.float32), np.int32(0)], fail)


def test_ops_compile_ahead_once_each_and_no_thread_outlives_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    compiled: list[str] = []
    real = opbyop.CompilingRunner._compile

    def counting(self: opbyop.CompilingRunner, text: str) -> object:
        compiled.append(threading.current_thread().name)
        return real(self, text)

    monkeypatch.setattr(opbyop.CompilingRunner, "_compile", counting)
    text = jaxlib_adapter.module_text(jaxlib_adapter.hlo_text_to_module_bytes(TEXT))
    x = np.array([1.0, 2.0, 3.0], np.float32)
    runner = opbyop.compile_and_run("cpu")
    for _ in range(2):  # the second run finds every op compiled
        out = opbyop.run_op_by_op(text, [x, np.int32(7)], runner)
        assert compare_outputs(out, [np.full(3, 36.0, np.float32), np.int32(7)]).close
    # constant, reduce, broadcast, multiply: each compiled once, ahead, by the pool.
    assert len(compiled) == 4
    assert all(name.startswith("xla-bugkit-compile") for name in compiled)
    assert not [t for t in threading.enumerate() if t.name.startswith("xla-bugkit-compile")]


def test_an_op_that_fails_to_compile_ahead_is_named_at_its_turn() -> None:
    # A custom call to a target nobody registered: it compiles ahead, fails, and the error
    # is raised where the op's turn comes, naming it.
    text = jaxlib_adapter.module_text(jaxlib_adapter.hlo_text_to_module_bytes(TEXT))
    text = text.replace("multiply(b.1, b.1)", 'custom-call(b.1, b.1), custom_call_target="no_such"')
    assert "no_such" in text
    with pytest.raises(opbyop.OpByOpError, match=r"^m\S* \(custom-call\) fails alone"):
        opbyop.run_op_by_op(
            text, [np.zeros(3, np.float32), np.int32(0)], opbyop.compile_and_run("cpu")
        )


# jit_total of tests/programs/wrong_then_lost_peer.py as jaxlib prints it: jnp.sum of the
# energies, sharded over 6 devices (the op-by-op reference runs it on one).
TOTAL = """\
HloModule jit_total, entry_computation_layout={(f64[98310]{0})->f64[]}

region_0.1 {
  reduce_sum.3 = f64[] parameter(0)
  reduce_sum.4 = f64[] parameter(1)
  ROOT reduce_sum.5 = f64[] add(reduce_sum.3, reduce_sum.4)
}

ENTRY main.2 {
  energy.1 = f64[98310]{0} parameter(0), sharding={devices=[6]<=[6]}
  constant.1 = f64[] constant(0)
  ROOT reduce_sum.7 = f64[] reduce(energy.1, constant.1), dimensions={0}, to_apply=region_0.1
}
"""


def test_a_sum_whose_order_decides_whether_it_overflows_has_no_reference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The ``max`` extreme set, as the replay gave it: +max, -max, +max, ... Added in turn it
    # is 0; XLA's own reduce on one device adds pairs of one sign first and ends in NaN.
    (x,) = extreme.arrays([(np.dtype(np.float64), (98310,))], "max", 42)
    run = opbyop.compile_and_run("cpu")
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.cumsum(x)[-1] == 0.0 and np.isnan(np.sum(x.reshape(-1, 2).T, axis=1).sum())
    (total,) = opbyop.run_op_by_op(TOTAL, [x], run)
    assert np.isnan(total)
    said = protocol.markers(capsys.readouterr().out, protocol.UNORDERED)
    assert said == [
        "reduce_sum.7 (reduce): at 1 of 1 elements its finite terms of one sign add past "
        "float64's largest value and those of the other pull back, so the order XLA adds "
        "them in decides whether it overflows"
    ]


def test_a_sum_with_one_right_value_keeps_it(capsys: pytest.CaptureFixture[str]) -> None:
    run = opbyop.compile_and_run("cpu")
    (tiny,) = extreme.arrays([(np.dtype(np.float64), (98310,))], "tiny", 42)
    generated = np.random.default_rng(42).standard_normal(98310)
    # An infinity among the terms is infinite in any order (the ``inf/nan`` set's case).
    infinite = generated.copy()
    infinite[7] = np.inf
    # Terms of each sign that add up to 0.9 of the largest value: no order overflows.
    near = np.full(98310, np.finfo(np.float64).max / 98310 * 1.8)
    near[1::2] *= -1
    for x in (tiny, generated, infinite, near):
        (total,) = opbyop.run_op_by_op(TOTAL, [x], run)
        assert compare_outputs([total], [np.sum(x)]).close and not np.isnan(total)
    # The largest value of one sign only: infinite in any order.
    (total,) = opbyop.run_op_by_op(TOTAL, [np.full(98310, np.finfo(np.float64).max)], run)
    assert total == np.inf
    assert protocol.UNORDERED not in capsys.readouterr().out
