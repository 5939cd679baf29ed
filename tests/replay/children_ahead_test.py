"""Replays made ahead (``children.Ahead``): taken by a later stage only where it asks for
exactly the same replay, its files unchanged, with what the replay left in its folder."""

from __future__ import annotations

import os
from pathlib import Path

from xla_bugkit.proc import Completed
from xla_bugkit.replay import children


def made(tmp_path: Path) -> tuple[children.Ahead, dict[str, object], dict[str, str]]:
    """One replay of a module file made ahead, which left ``test.npz`` in its ``out``."""
    module = tmp_path / "module.hlo.pb"
    module.write_bytes(b"module")
    out = tmp_path / "out-ahead"
    out.mkdir()
    (out / "test.npz").write_bytes(b"arrays")
    spec: dict[str, object] = {"hlo": str(module), "out": str(out), "flags": ["--xla_a=1"]}
    env = {"XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    (tmp_path / "ahead").mkdir()
    ahead = children.Ahead(tmp_path / "ahead")
    done = Completed(1, "XLA_BUGKIT_PHASE: run\n", False, 0.1)
    ahead.keep(children.asked(env, spec, 1 << 30), done, out)
    return ahead, spec, env


def test_the_same_replay_asked_later_is_taken_with_its_files(tmp_path: Path) -> None:
    ahead, spec, env = made(tmp_path)
    later = tmp_path / "out-later"
    later.mkdir()
    with children.made_ahead(ahead):
        done = children.taken_ahead(env, {**spec, "out": str(later)}, 1 << 30)
    assert done == Completed(1, "XLA_BUGKIT_PHASE: run\n", False, 0.1)
    assert (later / "test.npz").read_bytes() == b"arrays"


def test_another_replay_or_a_changed_file_is_not_taken(tmp_path: Path) -> None:
    ahead, spec, env = made(tmp_path)
    later = tmp_path / "out-later"
    later.mkdir()
    with children.made_ahead(ahead):
        asked = {**spec, "out": str(later)}
        assert children.taken_ahead(env, {**asked, "flags": []}, 1 << 30) is None
        assert children.taken_ahead({**env, "XLA_FLAGS": "--xla_b"}, asked, 1 << 30) is None
        assert children.taken_ahead(env, asked, None) is None
        module = Path(str(spec["hlo"]))
        module.write_bytes(b"another module")
        os.utime(module, ns=(1, 1))
        assert children.taken_ahead(env, asked, 1 << 30) is None
    assert not any(later.iterdir())
    # Outside the block nothing made ahead is taken.
    assert children.taken_ahead(env, {**spec, "out": str(later)}, 1 << 30) is None
