"""The cheap tests that keep redaction fast on large HLO text: for each secret pattern, a
test that is false only where the pattern cannot match, or the lines where it can.

They find words with ``str.find`` in a lowered copy, ~10x faster than any regex for them.
Lowering matches ``(?i)`` exactly only on ASCII text, so other text always passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from xla_bugkit.redact.patterns import SECRET_WORDS

Spans = list[tuple[int, int]]


def _hits(low: str, words: tuple[str, ...], tail: re.Pattern[str]) -> Iterator[int]:
    """Where in the lowered text ``low`` one of ``words`` is followed by ``tail``."""
    for word in words:
        at = low.find(word)
        while at >= 0:
            if tail.match(low, at + len(word)):
                yield at
            at = low.find(word, at + 1)


def word_then(words: Iterable[str], tail: str) -> Callable[[str], bool]:
    r"""A needle that is False only when none of ``words`` is followed by ``tail``, for a
    pattern whose every match holds that (``ASSIGN``: a secret word, then ``[\w.-]*=``)."""
    lowered, after = tuple(w.lower() for w in words), re.compile(tail)

    def may_match(s: str) -> bool:
        return not s.isascii() or next(_hits(s.lower(), lowered, after), None) is not None

    return may_match


def lines_with(words: Iterable[str], tail: str) -> Callable[[str], Spans]:
    """Like :func:`word_then`, for a pattern whose matches never cross a newline: the lines
    where one of ``words`` is followed by ``tail``, sorted, each once."""
    lowered, after = tuple(w.lower() for w in words), re.compile(tail)

    def lines(s: str) -> Spans:
        if not s.isascii():
            return [(0, len(s))]
        low, found = s.lower(), set()
        for at in _hits(low, lowered, after):
            end = low.find("\n", at)
            found.add((low.rfind("\n", 0, at) + 1, len(s) if end < 0 else end))
        return sorted(found)

    return lines


def lowered_has(*words: str) -> Callable[[str], bool]:
    """A needle for a pattern whose every match holds one of ``words``, in any case."""
    return word_then(words, "")


# ASSIGN's names hold a secret word ("pass" stands for PASSWORD, PASSWD and names ending in
# _pass), then more name and "=". Each word is one pass over the text: as few as will do.
ASSIGN_LINES = lines_with(
    [w for w in SECRET_WORDS.lower().split("|") if not w.startswith("pass")] + ["pass", "pwd"],
    r"[\w.-]*=",
)
AUTH_HEADER_LINES = lines_with(["authorization"], "")
# STRUCTURED's names end in a secret word, here by its start ("pass" of "password"), then
# the rest of the word and what follows a name there.
STRUCTURED_LINES = lines_with(
    ("pass", "pwd", "secret", "token", "credential", "auth", "cookie", "key", "session"),
    r"""[a-z]*(?:[-_]?id)?['"]?[ \t]*[:=]""",
)

# What every OPTION_VALUE match holds, in lowered text: a dash, option characters, a word.
_OPTION = re.compile(r"-[a-z0-9_.-]*(?:pass|pwd|token|secret|auth|credential|key)")


def may_be_secret_option(s: str) -> bool:
    """False only when ``OPTION_VALUE`` cannot match."""
    return not s.isascii() or _OPTION.search(s.lower()) is not None


_SIG = word_then(["sig"], "(?:nature)?=")


def may_be_query_signature(s: str) -> bool:
    """False only when ``QUERY_SIGNATURE`` cannot match."""
    return ("?" in s or "&" in s) and _SIG(s)
