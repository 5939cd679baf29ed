"""Where a NaN was made: a snapshot's result read for non-finite values from the wire, and
the execution a replay of a module runs on when its newest result holds them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from xla_bugkit.choose import dumps
from xla_bugkit.choose import snapshot as snapshots
from xla_bugkit.hlo import finite
from xla_bugkit.hlo.hlo_proto import HloSnapshot
from xla_bugkit.hlo.literal import numpy_to_literal

NAN, INF = float("nan"), float("inf")


def snapshot(path: Path, arguments: list, result: object | None, *, mtime: int = 0) -> Path:
    """An ``HloSnapshot`` as XLA writes one: the module left empty, ``arguments`` and
    ``result`` as literals (``result`` None: no result recorded)."""
    snap = HloSnapshot()
    for a in arguments:
        snap.arguments.add().CopyFrom(numpy_to_literal(a))
    if result is not None:
        snap.result.CopyFrom(numpy_to_literal(result))
    snap.execution_platform = "Host"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(snap.SerializeToString())
    if mtime:
        os.utime(path, (mtime, mtime))
    return path


def test_a_result_is_read_for_nan_and_infinity(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    nan = snapshot(tmp_path / "a.pb", [x, np.float32(2)], (x, np.array([1.0, NAN], np.float32)))
    # Inputs that hold NaN by design (targets masked as missing) do not count.
    masked = snapshot(tmp_path / "b.pb", [np.array([NAN], np.float32)], np.float32(0.5))
    assert finite.result_finite(nan) is False
    assert finite.result_finite(masked) is True


def test_every_float_type_is_read_from_its_own_field(tmp_path: Path) -> None:
    for dtype in (np.float64, np.float16, np.complex64, np.complex128):
        bad = np.array([1, INF], dtype=dtype)
        path = snapshot(tmp_path / f"{np.dtype(dtype).name}.pb", [bad[:1]], bad)
        assert finite.result_finite(path) is False, dtype
    # bf16 is stored as raw bytes: its exponent mask, not f16's.
    import ml_dtypes

    bf16 = np.array([1.5, NAN], dtype=ml_dtypes.bfloat16)
    assert finite.result_finite(snapshot(tmp_path / "bf16.pb", [bf16[:1]], bf16)) is False
    big = np.array([60000.0], dtype=ml_dtypes.bfloat16)  # f16's exponent mask would say inf
    assert finite.result_finite(snapshot(tmp_path / "bf16big.pb", [big], big)) is True
    ints = np.array([0x7F800000, -1], dtype=np.int32)  # a NaN's bits, as integers, are no NaN
    assert finite.result_finite(snapshot(tmp_path / "ints.pb", [ints], ints)) is True


def test_an_unreadable_snapshot_or_one_without_a_result_is_neither(tmp_path: Path) -> None:
    partial = snapshot(tmp_path / "p.pb", [np.ones(64, np.float32)], np.ones(64, np.float32))
    partial.write_bytes(partial.read_bytes()[:100])  # being written
    empty = tmp_path / "e.pb"
    empty.write_bytes(b"")
    no_result = snapshot(tmp_path / "n.pb", [np.ones(2, np.float32)], None)  # never ended
    for path in (partial, empty, no_result, tmp_path / "gone.pb"):
        assert finite.result_finite(path) is None, path


def loop(
    folder: Path, values: list[tuple[float, float]], label: str = "module_0003.jit_step"
) -> list[Path]:
    """One module's snapshots of a loop, oldest first (mtimes a second apart): each
    (input, output) value."""
    return [
        snapshot(
            folder / f"{label}.snapshot.{100 + i}.pb",
            [np.full(4, a, np.float32)],
            np.full(4, b, np.float32),
            mtime=1_000_000 + i,
        )
        for i, (a, b) in enumerate(values)
    ]


def test_a_replay_runs_on_the_execution_whose_result_first_held_a_nan(
    tmp_path: Path,
) -> None:
    # Its input may hold NaN by design (a masked target): the result is what counts.
    made = loop(tmp_path, [(1, 2), (NAN, NAN), (NAN, NAN), (NAN, NAN)])
    (tmp_path / "module_0003.jit_step.before_optimizations.txt").write_text("HloModule step\n")
    (module,) = dumps.index(tmp_path).modules
    chosen = snapshots.replay_snapshot(tmp_path, module)
    assert chosen is not None and chosen.name == made[1].name
    note = snapshots.replay_note(tmp_path, [module])
    assert note is not None and note.startswith("module_0003.jit_step: replayed on the execution")


def test_a_replay_runs_on_the_newest_when_its_inputs_are_finite(tmp_path: Path) -> None:
    # A NaN made and gone (a step that recovers), or none at all: the newest inputs stand.
    for name, values in {"recovers": [(1, 2), (1, NAN), (1, 2)], "clean": [(1, 2), (2, 3)]}.items():
        made = loop(tmp_path / name, values)
        (module,) = dumps.index(tmp_path / name).modules
        assert snapshots.replay_snapshot(tmp_path / name, module).name == made[-1].name  # type: ignore[union-attr]
        assert snapshots.replay_note(tmp_path / name, [module]) is None
    # NaN from the first result on: that module's normal, not a change to look into.
    made = loop(tmp_path / "poisoned", [(NAN, NAN), (NAN, NAN)])
    (module,) = dumps.index(tmp_path / "poisoned").modules
    assert snapshots.replay_snapshot(tmp_path / "poisoned", module).name == made[-1].name  # type: ignore[union-attr]


def test_a_strangers_snapshot_of_tuples_nested_without_end_is_unreadable(tmp_path: Path) -> None:
    from xla_bugkit.hlo import protowire

    literal = b""
    for _ in range(10_000):  # LiteralProto.tuple_literals (10), each holding the next
        literal = protowire.length_field(10, literal)
    path = tmp_path / "deep.pb"
    path.write_bytes(protowire.length_field(3, literal))  # HloSnapshot.result
    assert finite.result_finite(path) is None
