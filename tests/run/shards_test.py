"""A process's shards of global arrays, as the start-up hook saves them (``hook.shards``),
read back (``run.shards``) and put together again (``bundle.stitch``): real jax arrays over
forced CPU devices, sharded by rows, over a 2-D mesh and replicated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import saved_shards
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
save(7, [jax.device_put(v, s) for v, s in zip(values, shardings)])
np.savez(f"{folder}/want.npz", *values)
"""


def test_the_shards_the_hook_saves_give_back_the_global_arrays(tmp_path: Path) -> None:
    *arrays, layout = saved_shards(tmp_path, BODY, 7)
    params = shards.parse_layout(layout, len(arrays))
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
    whole, notes = assemble({0: shards.PartShards(params, tuple(arrays))})
    with np.load(tmp_path / "want.npz") as npz:
        want = [npz[f"arr_{i}"] for i in range(3)]
    assert notes == []
    for got, expected in zip(whole, want, strict=True):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    # The recorder wrote its record of them, which evidence_files reads.
    assert '"e": "shards", "t"' in next(tmp_path.glob("*.jsonl")).read_text()
