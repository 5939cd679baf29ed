"""Redaction in binary protos, where text sits among lengths and numbers.

A proto of a known kind (``schemas``) is walked along its field paths: each string that can
name a user, a host or a home is redacted as text and its length written anew; a literal's
values are copied untouched (a user name like "ab" can be two bytes of a float). What is in
no known string field is only searched, and the kinds found there are reported as left in
the copy, never rewritten; so is everything in a file of unknown layout.
"""

from __future__ import annotations

import functools
import gzip
import re
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import protowire
from xla_bugkit.redact.patterns import SECRET
from xla_bugkit.redact.rules import Rule, apply_rules, build_rules, clean_values
from xla_bugkit.redact.schemas import DATA, Schema, schema_for
from xla_bugkit.redact.walk import Edit, Walk

_GZIP_MAGIC = b"\x1f\x8b"


class _Writable(Protocol):
    def write(self, data: protowire.Buffer, /) -> int: ...


# A file that does not parse as the proto its name promises (disk errors are not caught).
_NOT_WHAT_ITS_NAME_SAYS = (BugkitError, EOFError, gzip.BadGzipFile, zlib.error)


@dataclass(frozen=True)
class BinaryCopy:
    """What copying one binary file did: the replacements by kind (``HOME_PATH``, ...) and
    the kinds still in the copy, where they could not be rewritten (never the values)."""

    counts: Counter[str]
    left: tuple[str, ...]


def copy_proto(
    src: Path,
    dst: Path,
    edit: Edit,
    rules: Sequence[Rule],
    scan: Iterable[Rule],
    *,
    chunk: int = 8 << 20,
) -> BinaryCopy:
    """Copy the dump file ``src`` to ``dst``, redacting the strings of a known proto (gzip
    compressed or not) with ``edit``, which applies ``rules``; report what ``scan`` (from
    :func:`binary_rules`) finds anywhere else in it."""
    schema = schema_for(src.name)
    walk = Walk(edit, rules)
    if schema is not None:
        try:
            with ExitStack() as stack:
                fin, fout = _open_pair(stack, src, dst)
                _rewrite_stream(fin, fout, schema, walk, chunk)
        except _NOT_WHAT_ITS_NAME_SAYS:
            walk, schema = Walk(edit, rules), None
    if schema is None:
        # Not a proto of a known layout after all: copied as it is, and searched whole.
        shutil.copyfile(src, dst)
        walk.unknown.append(_content(src))
    return BinaryCopy(walk.counts, _kinds_in(walk.unknown, scan))


def find_in_bytes(b: bytes, rules: Iterable[Rule]) -> list[str]:
    """What ``rules`` (from :func:`binary_rules`) find in binary ``b``, sorted; secrets shown
    masked."""
    # latin-1 maps each byte to one character, so the text rules scan binary data as is;
    # binary_rules converts the needles the same way so that non-ASCII names still match.
    found: set[str] = set()

    def note(kind: str, hit: str) -> None:
        hit = hit.encode("latin-1").decode("utf-8", "replace")
        found.add(hit[:4] + "…" if kind == SECRET else hit)

    # Rules run in turn on the rewritten copy, as in text, so "/home/alice" is reported
    # once as a home path and not again as the user name inside it.
    apply_rules(rules, b.decode("latin-1"), note)
    return sorted(found)


@functools.lru_cache(maxsize=8)
def binary_rules(
    homes: tuple[str, ...], users: tuple[str, ...], hosts: tuple[str, ...], secrets: tuple[str, ...]
) -> tuple[Rule, ...]:
    """The rules of a redactor for these values, made to scan bytes decoded as latin-1
    (made once per redactor's values: each binary file of a bundle asks for them)."""

    def conv(values: tuple[str, ...]) -> list[str]:
        return [v.encode("utf-8").decode("latin-1") for v in values]

    values = clean_values(
        home=conv(homes), user=conv(users), host=conv(hosts), secrets=conv(secrets)
    )
    rules = build_rules(*values)
    # In binary data a byte like 0xff is no letter: word boundaries must be ASCII ones.
    return tuple(
        Rule(
            rule.kind,
            re.compile(rule.pattern.pattern, _ascii(rule.pattern.flags)),
            rule.replace,
            _on_ascii(rule.needle) if callable(rule.needle) else rule.needle,
            _on_ascii(rule.lines) if rule.lines else None,
        )
        for rule in rules
    )


def _ascii(flags: int) -> int:
    return (flags & ~re.UNICODE) | re.ASCII


_NON_ASCII_TO_NUL = bytes(range(128)) + b"\0" * 128
_T = TypeVar("_T")


def _on_ascii(test: Callable[[str], _T]) -> Callable[[str], _T]:
    """A text rule's needle (or lines test) made fit for binary data, which is never all
    ASCII (and so would always pass it). What such a test looks for (a secret word, an
    option's dash, a newline) is ASCII in every match of the ASCII-only patterns here, so
    bytes that are not ASCII can be NULs: one character each still, so the lines found are
    where they were."""

    def on_ascii(s: str) -> _T:
        return test(s.encode("latin-1").translate(_NON_ASCII_TO_NUL).decode("ascii"))

    return on_ascii


def _rewrite_stream(
    fin: protowire.Readable, fout: _Writable, schema: Schema, walk: Walk, chunk: int
) -> None:
    """The top level of a message, field by field, so that a snapshot's arguments (gigabytes,
    maybe) are copied through in chunks and never held in memory."""
    while (header := protowire.read_header(fin)) is not None:
        number, kind, head, size = header
        if kind == protowire.LENGTH and schema.get(number) is DATA:
            fout.write(head)
            _copy_exactly(fin, fout, size, chunk)
            continue
        payload = memoryview(_read_exactly(fin, size))
        new = walk.field(number, kind, payload, schema)
        if new is payload:
            fout.write(head)
            fout.write(payload)
        else:
            fout.write(protowire.length_field(number, new))


def _copy_exactly(fin: protowire.Readable, fout: _Writable, size: int, chunk: int) -> None:
    while size:
        block = _read_exactly(fin, min(size, chunk))
        fout.write(block)
        size -= len(block)


def _read_exactly(fin: protowire.Readable, size: int) -> bytes:
    data = fin.read(size)
    if len(data) != size:
        raise BugkitError("not protobuf data (truncated)")
    return data


def _open_pair(stack: ExitStack, src: Path, dst: Path) -> tuple[protowire.Readable, _Writable]:
    """``src`` for reading and ``dst`` for writing, both through gzip where ``src`` is
    compressed (by content, as XLA's readers decide)."""
    with src.open("rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    if not compressed:
        return stack.enter_context(src.open("rb")), stack.enter_context(dst.open("wb"))
    fin = stack.enter_context(gzip.GzipFile(src, "rb"))
    # Level 6, not gzip's 9: several times faster, and the archive compresses it again.
    return fin, stack.enter_context(gzip.GzipFile(dst, "wb", compresslevel=6))


def _content(src: Path) -> bytes:
    data = src.read_bytes()
    if data.startswith(_GZIP_MAGIC):
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            return data
    return data


def _kinds_in(parts: list[protowire.Buffer], rules: Iterable[Rule]) -> tuple[str, ...]:
    # One search over all the parts, with a NUL between them: no name, path or token has one.
    found: set[str] = set()
    text = b"\0".join(bytes(p) for p in parts).decode("latin-1")
    apply_rules(rules, text, lambda kind, hit: found.add(kind))
    return tuple(sorted(found))
