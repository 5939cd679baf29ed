"""Removing what a failed extraction made, however deep: Python 3.11's shutil.rmtree recurses
and gives up with a RecursionError some thousand levels down."""

from __future__ import annotations

import os
from pathlib import Path

from xla_bugkit.archive import remove_tree

DEPTH = 3000  # three times what shutil.rmtree survives with Python's default recursion limit


def _deep_tree(root: Path, depth: int) -> None:
    """``root``/d/d/.../d, ``depth`` levels, a file in each; made relative to an open folder,
    since the whole path is too long for any call that takes one."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def test_removes_a_tree_deeper_than_rmtree_can(tmp_path: Path) -> None:
    _deep_tree(tmp_path / "deep", DEPTH)
    (tmp_path / "deep" / "wide").mkdir()
    for i in range(100):
        (tmp_path / "deep" / "wide" / f"{i}").mkdir()
    remove_tree(tmp_path / "deep")
    assert list(tmp_path.iterdir()) == []


def test_removes_a_file_a_link_and_nothing(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "x").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "kept")
    (tmp_path / "file").write_text("y")
    remove_tree(tmp_path / "link")  # the link goes, not what it points to
    remove_tree(tmp_path / "file")
    remove_tree(tmp_path / "never-was")
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert (tmp_path / "kept" / "x").read_text() == "x"
