"""``collect --dump-passes REGEX``: the chosen module's pass dumps in the bundle, the last ones
before the failure kept longest when the size budget forces a choice.

The bundle is the real one of a real wrong result (``wrong_result``: XLA's CPU fast-min-max);
the drop order and the notes are checked on plans built here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.programs import Collected
from xla_bugkit.bundle import extras, layout
from xla_bugkit.bundle.layout import Planned
from xla_bugkit.choose.dumps import Role
from xla_bugkit.collecting.options import CollectOptions, check_options
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import flags


def _planned(label: str, name: str, role: Role) -> Planned:
    folder = f"modules/{label}/{layout.PASSES}/" if role is Role.PASS_DUMP else f"modules/{label}/"
    return Planned(Path("/nowhere") / name, folder + name, role, label)


def _passes(label: str, count: int) -> list[Planned]:
    return [
        _planned(label, f"{label}.{i:04d}.simplification.after_a.before_b.txt", Role.PASS_DUMP)
        for i in range(count)
    ]


def test_pass_dumps_go_before_inputs_the_other_modules_first_the_earliest_first() -> None:
    first, other = "module_0002.jit_f", "module_0005.jit_g"
    plan = [
        _planned(first, "f.before_optimizations.txt", Role.BEFORE_TEXT),
        _planned(first, "f.memory-usage-report.txt", Role.MEMORY_REPORT),
        *_passes(first, 3),
        _planned(other, "g.memory-usage-report.txt", Role.MEMORY_REPORT),
        *_passes(other, 2),
    ]
    order = [p.arcname.rsplit("/", 1)[1] for p in layout.drop_order(plan)]
    assert order[:5] == [
        "g.memory-usage-report.txt",
        f"{other}.0000.simplification.after_a.before_b.txt",
        f"{other}.0001.simplification.after_a.before_b.txt",
        f"{first}.0000.simplification.after_a.before_b.txt",
        f"{first}.0001.simplification.after_a.before_b.txt",
    ]
    assert order[5] == f"{first}.0002.simplification.after_a.before_b.txt"  # around the failure
    assert order.index("f.memory-usage-report.txt") > 5


def test_one_note_per_module_says_what_is_kept_and_what_the_budget_left_out() -> None:
    kept = _passes("module_0002.jit_f", 2)
    dropped = [p.arcname for p in _passes("module_0002.jit_f", 5)[:3]]
    dropped += [p.arcname for p in _passes("module_0005.jit_g", 4)]
    assert extras.pass_dump_notes(kept, dropped) == [
        "pass dumps of module_0002.jit_f: 2 under modules/module_0002.jit_f/passes/; the 3 "
        "dumped earliest left out to fit the size budget",
        "pass dumps of module_0005.jit_g: all 4 left out to fit the size budget",
    ]


def test_the_flag_reaches_xla_and_a_bad_regex_is_refused(tmp_path: Path) -> None:
    merged = flags.merge(None, tmp_path, pass_re="algsimp|fusion")
    assert f"{flags.PASS_RE}=algsimp|fusion" in merged.flags
    assert flags.PASS_RE not in flags.merge(None, tmp_path).value
    for bad, says in (("(", "not a regular expression"), ("a b", "without spaces")):
        options = CollectOptions(output=tmp_path / "b.zip", dump_passes=bad)
        with pytest.raises(BugkitError, match=says):
            check_options(["python", "x.py"], options)


def test_the_chosen_modules_pass_dumps_are_bundled_as_text_in_order(
    bundles: Callable[..., Collected],
) -> None:
    c = bundles("wrong_result", "--module", r"\.jit_f$", "--dump-passes", "algsimp")
    assert c.returncode == 0, c.stderr
    label = c.manifest()["modules"][0]["label"]
    folder = f"modules/{label}/{layout.PASSES}/"
    names = [n for n in c.names() if n.startswith(folder)]
    assert names and all(n.endswith(".txt") and "algsimp" in n for n in names)
    assert names == sorted(names)
    assert f"pass dumps of {label}: {len(names)} under {folder}" in c.stderr
    assert "HloModule jit_f" in c.text(names[-1])
    # Their role is many files: the module's entry leaves it to the bundle's file list.
    assert "pass dump" not in c.manifest()["modules"][0]["files"]
