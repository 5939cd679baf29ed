"""Redaction in binary protos and snapshots, where a changed length corrupts the data: home
paths are rewritten at the same length, everything else is only found and reported."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from xla_bugkit.redact.patterns import SECRET
from xla_bugkit.redact.rules import Rule, apply_rules, build_rules, clean_values


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


def copy_same_length(src: Path, dst: Path, homes: tuple[str, ...], *, chunk: int) -> int:
    """Copy ``src`` to ``dst`` with each of ``homes`` (followed by a slash) rewritten as ``~``
    and as many slashes as it had characters; returns how many were rewritten."""
    needles = [(h + "/").encode() for h in homes]
    if not needles:
        shutil.copyfile(src, dst)
        return 0
    carry_len = max(len(n) for n in needles) - 1
    count = 0
    with src.open("rb") as fin, dst.open("wb") as fout:
        carry = b""
        while block := fin.read(chunk):
            buf = carry + block
            for needle in needles:
                count += buf.count(needle)
                buf = buf.replace(needle, b"~" + b"/" * (len(needle) - 1))
            cut = max(len(buf) - carry_len, 0)
            fout.write(buf[:cut])
            carry = buf[cut:]
        fout.write(carry)
    return count


def binary_rules(
    homes: tuple[str, ...], users: tuple[str, ...], hosts: tuple[str, ...], secrets: tuple[str, ...]
) -> list[Rule]:
    """The rules of a redactor for these values, made to scan bytes decoded as latin-1."""

    def conv(values: tuple[str, ...]) -> list[str]:
        return [v.encode("utf-8").decode("latin-1") for v in values]

    values = clean_values(
        home=conv(homes), user=conv(users), host=conv(hosts), secrets=conv(secrets)
    )
    # In binary data a byte like 0xff is no letter: word boundaries must be ASCII ones.
    return [
        Rule(rule.kind, re.compile(rule.pattern.pattern, _ascii(rule.pattern.flags)), rule.replace)
        for rule in build_rules(*values)
    ]


def _ascii(flags: int) -> int:
    return (flags & ~re.UNICODE) | re.ASCII
