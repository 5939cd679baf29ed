"""A process's shards of global arrays, as the start-up hook saves them (``hook.shards``),
read back (``run.shards``) and put together again (``bundle.stitch``): real jax arrays over
forced CPU devices, sharded by rows, over a 2-D mesh and replicated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import save_shards, shards_file
from xla_bugkit.bundle.stitch import assemble
from xla_bugkit.run import shards

pytestmark = pytest.mark.jax

# Three arrays, sharded by rows, over a 2-D mesh and replicated.
BODY = """
devices = np.array(jax.devices())
rows = Mesh(devices, ("r",))
grid = Mesh(devices.reshape(2, 2), ("a", "b"))
values = [
    np.arange(24, dtype=np.float32).reshape(8, 3),
    np.arange(16, dtype=np.int32).reshape(4, 4),
    np.linspace(0, 1, 5, dtype=np.float32),
]
shardings = [NamedSharding(rows, P("r")), NamedSharding(grid, P("a", "b")),
             NamedSharding(rows, P())]
arrays = [jax.device_put(v, s) for v, s in zip(values, shardings)]
save(7, arrays)
np.savez(f"{folder}/want.npz", *values)
# Later calls of the same module: the first call's file stays, and the two newest.
save(9, arrays, 2)
save(11, arrays, 3)
save(13, arrays, 4)
"""


def test_the_shards_the_hook_saves_give_back_the_global_arrays(tmp_path: Path) -> None:
    save_shards(tmp_path, BODY)
    kept = sorted(int(f.name.split("-")[-1][: -len(".npz")]) for f in tmp_path.glob("*.shards-*"))
    assert kept == [7, 11, 13], "the first call's shards and the two newest, not one between"
    *arrays, layout = shards_file(tmp_path, 7)
    params, call = shards.parse_layout(layout, len(arrays))
    assert call == 1
    assert shards.parse_layout(shards_file(tmp_path, 13)[-1], len(arrays))[1] == 4
    assert [p.dims for p in params] == [(8, 3), (4, 4), (5,)]
    assert all(p.devices == (0, 1, 2, 3) for p in params)
    # 4 row blocks; 4 tiles of the grid; the replicated array once, held by 4 devices.
    assert len(arrays) == 4 + 4 + 1
    assert [len(p.shards) for p in params] == [4, 4, 4]
    assert params[0].shards[1].bounds == ((2, 4), (0, 3))
    assert {s.bounds for s in params[1].shards} == {
        ((a, a + 2), (b, b + 2)) for a in (0, 2) for b in (0, 2)
    }
    assert {s.array for s in params[2].shards} == {8}
    assert {s.process for s in params[2].shards} == {0}
    whole, notes = assemble({0: shards.PartShards(params, tuple(arrays), call)})
    with np.load(tmp_path / "want.npz") as npz:
        want = [npz[f"arr_{i}"] for i in range(3)]
    assert notes == []
    for got, expected in zip(whole, want, strict=True):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    # The recorder wrote its record of them, which evidence_files reads.
    records = next(tmp_path.glob("*.jsonl")).read_text()
    assert '"e": "shards", "t"' in records and '"call": 4' in records


def test_shards_over_the_budget_are_not_copied_from_the_devices(tmp_path: Path) -> None:
    """Every call of a job's step comes to the hook: one whose shards cannot be kept costs no
    copy. The size is each place once (the replicated array's 5 values once, not 4 times)."""
    save_shards(tmp_path, BODY, XLA_BUGKIT_ARGS_BUDGET="100")
    assert not list(tmp_path.glob("*.shards-*"))
    records = next(tmp_path.glob("*.jsonl")).read_text()
    least = 8 * 3 * 4 + 4 * 4 * 4 + 5 * 4
    assert records.count('"e": "args_skipped"') == 4 and f'"bytes": {least}' in records
