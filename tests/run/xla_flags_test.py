"""XLA_FLAGS as the hook edits it: collect's dump folder moved to a process's own, and a
dump folder the program set itself taken out."""

from __future__ import annotations

from xla_bugkit.run.hook import xla_flags


def test_only_collects_own_dump_folder_moves() -> None:
    ours = "/w/dump"
    flags = "--a=1 --xla_dump_to=/w/dump --xla_dump_hlo_as_text"
    assert xla_flags.own_dump_flags(flags, ours, "/w/dump/9") == (
        "--a=1 --xla_dump_to=/w/dump/9 --xla_dump_hlo_as_text"
    )
    # The program's own folder, or one that merely starts with ours, stays.
    for theirs in ("--xla_dump_to=/mine", "--xla_dump_to=/w/dump2"):
        assert xla_flags.own_dump_flags(theirs, ours, "/w/dump/9") == theirs
    spaced = "--xla_dump_to='/w/a b' --b"
    assert xla_flags.own_dump_flags(spaced, "/w/a b", "/w/a b/9") == "--xla_dump_to='/w/a b/9' --b"
    assert xla_flags.dump_dir_of(spaced) == "/w/a b"


def test_a_dump_folder_the_program_set_itself_gives_way_to_collects() -> None:
    """XLA would dump into the program's folder (the last --xla_dump_to wins), adding
    collect's files to the user's: the hook takes it out and says which it was."""
    value = "--a=1 --xla_dump_to=/w/dump --xla_dump_to=./xla_dump --xla_dump_hlo_pass_re=.*"
    kept, theirs = xla_flags._without_dump_dirs_besides(value, "/w/dump")
    assert theirs == ["./xla_dump"] and xla_flags.dump_dir_of(kept) == "/w/dump"
    assert "--xla_dump_hlo_pass_re=.*" in kept and "--a=1" in kept
    # A rank's folder inside collect's stays; a quoted folder of the program's goes.
    assert xla_flags._without_dump_dirs_besides("--xla_dump_to=/w/dump/12 --b", "/w/dump") == (
        "--xla_dump_to=/w/dump/12 --b",
        [],
    )
    assert xla_flags._without_dump_dirs_besides("--xla_dump_to='/my dir' --b", "/w/dump") == (
        "--b",
        ["/my dir"],
    )
