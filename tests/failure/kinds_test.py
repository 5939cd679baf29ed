"""The kinds of failure and their one table (``failure.kinds``): every kind has exactly one
row with every field stated, and no module outside the table keeps its own list of kinds or
reads a kind's property with a default, which would fail silently for a new kind."""

from __future__ import annotations

import ast
import dataclasses
import re
import string
import typing
from pathlib import Path

from xla_bugkit.failure.kinds import KINDS, Kind, KindInfo, Shows

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "xla_bugkit"
TABLE = PACKAGE / "failure" / "kinds.py"
BUNDLE_FORMAT = ROOT / "docs" / "bundle-format.md"
VALUES = frozenset(kind.value for kind in Kind)


def test_every_kind_has_one_row() -> None:
    assert list(KINDS) == list(Kind)
    # A dict display keeps the last of two equal keys: count them in the source itself.
    keys = [
        key.attr
        for node in ast.walk(ast.parse(TABLE.read_text("utf-8")))
        if isinstance(node, ast.Dict)
        for key in node.keys
        if _kind_member(key) and isinstance(key, ast.Attribute)
    ]
    assert sorted(keys) == sorted(kind.name for kind in Kind)


def test_every_field_is_required_and_set() -> None:
    hints = typing.get_type_hints(KindInfo)
    for field in dataclasses.fields(KindInfo):
        # A default would let a new kind's row leave the field out.
        assert field.default is dataclasses.MISSING, field.name
        assert field.default_factory is dataclasses.MISSING, field.name
    for kind, info in KINDS.items():
        for field in dataclasses.fields(KindInfo):
            value = getattr(info, field.name)
            assert isinstance(value, hints[field.name]), (kind, field.name, value)
        assert info.sentence and info.expected, kind


def test_the_kinds_agree_with_each_other() -> None:
    for kind, info in KINDS.items():
        assert not info.dies or info.xla_failure, kind  # a death is one of XLA's failures
        assert not info.error_status or info.shows_xla, kind
        assert not info.shows_xla or info.xla_failure, kind
        # Only a kind that shows no XLA failure needs a reference, and it is never a stop.
        assert not (info.needs_reference and (info.xla_failure or info.stopped)), kind
        assert (info.replay_shows is Shows.CRASH) == info.dies, kind
        assert (info.replay_shows is Shows.ERROR) == info.error_status, kind
        assert kind.is_failure or info.weight == 0, kind


def test_the_bundle_format_names_every_kind() -> None:
    # The values are what a manifest's failure record holds: its readers need every one.
    text = " ".join(BUNDLE_FORMAT.read_text("utf-8").split())
    assert [kind for kind in Kind if f"`{kind.value}`" not in text] == []


def test_every_sentence_fills_only_what_is_known() -> None:
    for kind, info in KINDS.items():
        names = {name for _, name, _, _ in string.Formatter().parse(info.sentence) if name}
        assert names <= {"sig", "module", "code"}, kind
        filled = info.sentence.format(sig=" (SIGABRT)", module=" a module", code=" code")
        assert filled.endswith(".") and "{" not in filled, kind


# An article, and the word it stands before: "a" before a consonant's sound, "an" before a
# vowel's; an acronym ("an XLA error") is read letter by letter, and left out here.
_ARTICLE = re.compile(r"\b(a|an) (?![A-Z]{2})([A-Za-z])")
# An article before a participle that ends the clause: a label pasted into prose ("The run
# ends in an interrupted."), no noun after it.
_PASTED = re.compile(r"\b(?:a|an) [\w-]+ed[.,;:]")


def test_every_sentence_reads_as_english() -> None:
    for kind, info in KINDS.items():
        filled = info.sentence.format(sig=" (SIGABRT)", module=" `jit(f)`", code=" `jit(f)`")
        assert filled[0].isupper() and filled.endswith("."), (kind, filled)
        assert ". " not in filled, (kind, filled)  # one sentence
        for article, letter in _ARTICLE.findall(filled):
            assert (article == "an") == (letter.lower() in "aeiou"), (kind, filled)
        assert not _PASTED.search(filled), (kind, filled)


def test_the_rule_for_english_finds_what_a_kind_pasted_into_a_sentence_gave() -> None:
    # What the table once said of an interrupted run, and two more of the same kind.
    for said in ("The run ends in an interrupted.", "The run ends in a error.", "an hang"):
        articles = [(a == "an") == (w.lower() in "aeiou") for a, w in _ARTICLE.findall(said)]
        assert _PASTED.search(said) or not all(articles), said


def test_no_module_keeps_its_own_table_of_kinds() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE:
            continue
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            found += [f"{where}:{node.lineno}: {why}" for why in _own_table(node)]
    assert not found, "ask failure.kinds.KINDS instead:\n" + "\n".join(found)


def _own_table(node: ast.AST) -> list[str]:
    """What in ``node`` is a table of kinds of its own: a dict keyed by a kind, a set, tuple
    or list of kinds, a kind's property read with a default."""
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        members, values = sum(map(_kind_member, keys)), sum(map(_kind_value, keys))
        return ["a dict keyed by failure kinds"] if members or values > 1 else []
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        kinds = sum(_kind_member(e) or _kind_value(e) for e in node.elts)
        return ["a collection of failure kinds"] if kinds > 1 else []
    if not isinstance(node, ast.Call) or not node.args:
        return []
    if isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return [".get() of a kind, with its default"] if _names_a_kind(node.args[0]) else []
    if isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return ["getattr() on Kind, with its default"] if _names_kind_enum(node.args[0]) else []
    return []


def _kind_member(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and _names_kind_enum(node.value)
        and node.attr in Kind.__members__
    )


def _kind_value(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in VALUES


def _names_kind_enum(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "Kind"


def _names_a_kind(node: ast.AST) -> bool:
    """``kind``, ``failure.kind``, ``Kind(...)``: an expression that is a failure's kind."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind" or _kind_member(node)
    if isinstance(node, ast.Call):
        return _names_kind_enum(node.func)
    return False
