"""One proto's walk along its schema (``schemas``): the strings of known text fields redacted
as text, with their lengths written anew; a literal's numbers passed over; every other
length-delimited field kept, to be searched afterwards (``binary``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xla_bugkit.hlo import protowire
from xla_bugkit.redact.rules import Rule
from xla_bugkit.redact.schemas import DATA, Leaf, Schema

# Text in, redacted text and what was replaced out: ``Redactor.text_with_report``.
Edit = Callable[[str], tuple[str, Counter[str]]]

# A message this large is searched first, and passed over whole when no rule can match in
# it: a module's computations, where newer JAX keeps no path (the stack frame index has
# them). A walk costs ~25 us an instruction, a search ~40 ms a MB.
_SKIM = 1 << 16
# The only characters that Python's case-insensitive matching takes for ASCII letters, in
# UTF-8 (long s, the Kelvin sign, dotted and dotless i), and the letters they are taken for.
_FOLDS = ((b"\xc5\xbf", b"s"), (b"\xe2\x84\xaa", b"k"), (b"\xc4\xb0", b"i"), (b"\xc4\xb1", b"i"))
_NON_ASCII_TO_X = bytes(range(128)) + b"x" * 128


@dataclass
class Walk:
    """One file's walk: the edit with its cache, what it replaced, and the fields of no known
    meaning, to search afterwards. ``rules`` are those ``edit`` applies."""

    edit: Edit
    rules: Sequence[Rule]
    counts: Counter[str] = field(default_factory=Counter)
    unknown: list[protowire.Buffer] = field(default_factory=list)
    # The same source file and function names recur in every instruction of a module.
    _done: dict[bytes, tuple[bytes, Counter[str]]] = field(default_factory=dict)

    def field(
        self,
        number: int,
        kind: int,
        payload: protowire.Buffer,
        schema: Schema,
        rules: Sequence[Rule] | None = None,
    ) -> protowire.Buffer:
        """The payload to write for one field of a message of ``schema``: ``payload`` itself
        where nothing changed. ``rules``: those that can still match here (default: all)."""
        sub = schema.get(number)
        if kind != protowire.LENGTH or sub is DATA:
            return payload
        if sub is None:
            self._unknown(payload)
            return payload
        if isinstance(sub, Leaf):
            return self._text(payload)  # TEXT: DATA was passed over above
        return self._message(payload, sub, self.rules if rules is None else rules)

    def _message(
        self, data: protowire.Buffer, schema: Schema, rules: Sequence[Rule]
    ) -> protowire.Buffer:
        if len(data) >= _SKIM:
            rules = _possible(rules, bytes(data))
            if not rules:
                return data  # nothing to rewrite in its strings, nothing to find around them
        out: bytearray | None = None  # made only when a field changes: most never do
        done = gap = 0
        for number, kind, start, at, end in protowire.spans(data):
            if kind != protowire.LENGTH or number not in schema:
                continue
            # Between the known fields: names, shapes, configs, to be searched afterwards.
            self._unknown(data[gap:start])
            gap = end
            payload = data[at:end]
            new = self.field(number, kind, payload, schema, rules)
            if new is not payload:
                out = bytearray() if out is None else out
                out += data[done:start]
                out += protowire.length_field(number, new)
                done = end
        self._unknown(data[gap:])
        if out is None:
            return data
        out += data[done:]
        return out

    def _text(self, payload: protowire.Buffer) -> protowire.Buffer:
        key = bytes(payload)
        if key not in self._done:
            # surrogateescape: bytes that are not UTF-8 come back as they were.
            new, counts = self.edit(key.decode("utf-8", "surrogateescape"))
            self._done[key] = (new.encode("utf-8", "surrogateescape"), counts)
        new_bytes, counts = self._done[key]
        self.counts.update(counts)
        return payload if new_bytes == key else new_bytes

    def _unknown(self, part: protowire.Buffer) -> None:
        if part:
            self.unknown.append(part)


def _possible(rules: Sequence[Rule], raw: bytes) -> list[Rule]:
    r"""The rules that may match in a UTF-8 string inside ``raw`` (a rule that cannot match
    in a message cannot in the messages inside it, so these are all its fields need).

    Literal needles are looked for as UTF-8. The others look for ASCII words, which under
    ``(?i)`` can also be spelled with the four characters above: they are folded to their
    letters, and every other byte that is not ASCII becomes a letter, as a non-ASCII letter
    of a name is one to ``\w``."""
    folded = raw
    for char, letter in _FOLDS:
        folded = folded.replace(char, letter)
    ascii_text = folded.translate(_NON_ASCII_TO_X).decode("ascii")
    return [rule for rule in rules if _may_match(rule, raw, ascii_text)]


def _may_match(rule: Rule, raw: bytes, ascii_text: str) -> bool:
    needle = rule.needle
    if isinstance(needle, str):
        return needle.encode() in raw
    if isinstance(needle, tuple):
        return any(n.encode() in raw for n in needle)
    if needle is not None and not needle(ascii_text):
        return False
    return rule.lines is None or bool(rule.lines(ascii_text))
