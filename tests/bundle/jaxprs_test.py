"""Which jaxpr goes with a module: JAX dumps one per lowering (``jax_N_f.jaxpr.txt``) and XLA
one module per compile (``module_M.jit_f``); they pair in order when their counts agree."""

from __future__ import annotations

from pathlib import Path

from xla_bugkit.bundle import layout
from xla_bugkit.choose.dumps import DumpIndex, DumpModule
from xla_bugkit.run.hook import JAXPRS


def _index(root: Path, *modules: tuple[int, str], jaxprs: tuple[str, ...]) -> DumpIndex:
    (root / JAXPRS).mkdir(parents=True)
    for name in jaxprs:
        (root / JAXPRS / name).write_text("{ lambda ; a:f32[]. let  in (a,) }\n")
    return DumpIndex(root, tuple(DumpModule(i, n, ()) for i, n in modules), ())


def test_lowerings_and_compiles_pair_in_order(tmp_path: Path) -> None:
    index = _index(
        tmp_path,
        (3, "jit_train_step"), (7, "jit__lambda"), (9, "jit_train_step"),
        jaxprs=("jax_000001_train_step.jaxpr.txt", "jax_000002_<lambda>.jaxpr.txt",
                "jax_000004_train_step.jaxpr.txt", "jax_000005_step.jaxpr.txt"),
    )  # fmt: skip
    first, lam, second = index.modules
    assert [p.name for p in layout.jaxprs_of(index, first)] == ["jax_000001_train_step.jaxpr.txt"]
    assert [p.name for p in layout.jaxprs_of(index, second)] == ["jax_000004_train_step.jaxpr.txt"]
    assert [p.name for p in layout.jaxprs_of(index, lam)] == ["jax_000002_<lambda>.jaxpr.txt"]


def test_unpaired_counts_give_the_newest_few_and_no_folder_gives_none(tmp_path: Path) -> None:
    names = tuple(f"jax_{i:06d}_f.jaxpr.txt" for i in range(5))
    index = _index(tmp_path / "a", (1, "jit_f"), jaxprs=names)
    assert [p.name for p in layout.jaxprs_of(index, index.modules[0])] == list(names[-3:])
    bare = DumpIndex(tmp_path / "b", (DumpModule(1, "jit_f", ()),), ())
    assert layout.jaxprs_of(bare, bare.modules[0]) == []
