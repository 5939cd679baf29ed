"""The rules one redactor applies: its homes, names and secrets, and the secret patterns, each
compiled with a cheap test (a needle, ``needles``) that skips the texts it cannot match."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from xla_bugkit.redact import needles
from xla_bugkit.redact.needles import Spans
from xla_bugkit.redact.patterns import (
    ASSIGN,
    AUTH_HEADER,
    BEARER,
    COMMON_NAMES,
    HOME,
    HOME_PATH,
    HOST,
    HOST_NAME,
    OPTION_VALUE,
    PLAIN_VALUES,
    QUERY_SIGNATURE,
    REDACTED,
    SECRET,
    STRUCTURED,
    SYSTEM_DIRS,
    TOKEN_PATTERNS,
    TRIVIAL_HOSTS,
    URL_CREDENTIALS,
    USER,
    USER_NAME,
)

_Values = tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]
    # What every match contains (or a test that is true of every text with a match): a text
    # without it is skipped. Lookbehind alternations cost ~0.3 s per MB of HLO text, where a
    # substring test costs ~1 ms.
    needle: str | tuple[str, ...] | Callable[[str], bool] | None = None  # a tuple: any of them
    # For a rule whose matches never cross a newline: the lines (spans of the text) that can
    # hold one, the rest skipped. Case-insensitive patterns cost ~0.2 s per MB (sre tries
    # them at every position): a rare "password: x" in an HLO dump costs its line only.
    lines: Callable[[str], Spans] | None = None

    def may_match(self, s: str) -> bool:
        if self.needle is None:
            return True
        if isinstance(self.needle, str):
            return self.needle in s
        if isinstance(self.needle, tuple):
            return any(n in s for n in self.needle)
        return self.needle(s)

    def spans(self, s: str) -> Spans:
        """Where in ``s`` a match can be; empty where nowhere."""
        if not self.may_match(s):
            return []
        return [(0, len(s))] if self.lines is None else self.lines(s)


def apply_rules(rules: Iterable[Rule], s: str, on_hit: Callable[[str, str], None]) -> str:
    """``s`` with each rule applied in turn; ``on_hit(kind, match)`` hears of each match."""
    for rule in rules:
        spans = rule.spans(s)
        if not spans:
            continue

        def replace(m: re.Match[str], rule: Rule = rule) -> str:
            on_hit(rule.kind, m[0])
            return rule.replace(m)

        if spans == [(0, len(s))]:
            s = rule.pattern.sub(replace, s)
            continue
        pieces, done = [], 0
        for start, end in spans:
            pieces += [s[done:start], rule.pattern.sub(replace, s[start:end])]
            done = end
        s = "".join([*pieces, s[done:]])
    return s


def clean_values(
    *,
    home: str | Iterable[str],
    user: str | Iterable[str],
    host: str | Iterable[str],
    secrets: Iterable[str],
) -> tuple[_Values, _Values, _Values, _Values]:
    """The homes, user names, host names and secret values worth redacting, normalized and
    longest first."""
    return (
        _clean(home, lambda h: h.rstrip("/\\") or h, _is_private_home),
        _clean(user, str.strip, bool),
        _clean(host, lambda h: h.strip().rstrip("."), lambda h: h not in TRIVIAL_HOSTS),
        _clean(secrets, lambda v: v, bool),
    )


def _clean(
    values: str | Iterable[str], norm: Callable[[str], str], keep: Callable[[str], bool]
) -> tuple[str, ...]:
    items = [values] if isinstance(values, str) else list(values)
    out = {norm(v) for v in items if v}
    # Longest first, so "/home/alice/work" wins over "/home/alice" and "box.corp" over "box".
    return tuple(sorted((v for v in out if keep(v)), key=lambda v: (-len(v), v)))


def _is_private_home(home: str) -> bool:
    return bool(home) and os.path.normpath(home) not in SYSTEM_DIRS


def _is_distinctive(name: str) -> bool:
    return len(name) >= 4 and name.lower() not in COMMON_NAMES


def build_rules(
    homes: _Values, users: _Values, hosts: _Values, secrets: _Values
) -> tuple[Rule, ...]:
    # Secrets first: a token may contain a user name and must vanish whole.
    rules = [_secret_rule(p, needle) for p, needle in TOKEN_PATTERNS]
    rules += _known_secret_rules(secrets)
    rules += [
        _keep_prefix_rule(OPTION_VALUE, needle=needles.may_be_secret_option),
        _keep_prefix_rule(AUTH_HEADER, lines=needles.AUTH_HEADER_LINES),
        _keep_prefix_rule(ASSIGN, lines=needles.ASSIGN_LINES),
        _keep_prefix_rule(STRUCTURED, lines=needles.STRUCTURED_LINES, quoted=True),
        _keep_prefix_rule(QUERY_SIGNATURE, needle=needles.may_be_query_signature),
        _keep_prefix_rule(BEARER, needle=needles.lowered_has("bearer", "basic")),
    ]
    url = re.compile(URL_CREDENTIALS)
    rules.append(Rule(SECRET, url, lambda m: m[1] + REDACTED + m[2], needle="://"))
    # A path may not continue into a longer name ("/home/alice2", "/home/alice.bak").
    end = r"(?![\w-]|\.\w)"
    for home in homes:
        pattern = re.compile(rf"(?<![\w.~-]){re.escape(home)}{end}")
        rules.append(Rule(HOME_PATH, pattern, _constant(HOME), needle=home))
    names = [(h, HOST_NAME, HOST) for h in hosts] + [(u, USER_NAME, USER) for u in users]
    for name, kind, placeholder in sorted(names, key=lambda t: -len(t[0])):
        rules.append(Rule(kind, _name_pattern(name), _constant(placeholder), needle=name))
    return tuple(rules)


def _known_secret_rules(secrets: tuple[str, ...]) -> list[Rule]:
    """Known secret values: a text that is one (an argument of the command) always; inside
    other text wherever it stands as a word, unless it is too plain a word to hunt for."""
    if not secrets:
        return []
    exact = "|".join(re.escape(v) for v in secrets)
    rules = [Rule(SECRET, re.compile(rf"\A(?:{exact})\Z"), _constant(REDACTED), needle=secrets)]
    wide = tuple(v for v in secrets if _worth_hunting(v))
    if wide:
        pattern = re.compile(rf"(?<!\w)(?:{'|'.join(map(re.escape, wide))})(?!\w)")
        rules.append(Rule(SECRET, pattern, _constant(REDACTED), needle=wide))
    return rules


def _worth_hunting(value: str) -> bool:
    # "1", "off" or "main" everywhere would shred the text (and the module.mlir that replay
    # reads); a short number is no secret worth that.
    if len(value) < 3 or value.lower() in PLAIN_VALUES | COMMON_NAMES:
        return False
    return not (value.isdigit() and len(value) < 6)


def _secret_rule(pattern: str, needle: str | tuple[str, ...]) -> Rule:
    return Rule(SECRET, re.compile(pattern), _constant(REDACTED), needle)


def _keep_prefix_rule(
    pattern: str,
    needle: Callable[[str], bool] | None = None,
    lines: Callable[[str], Spans] | None = None,
    *,
    quoted: bool = False,
) -> Rule:
    """A rule that keeps its match's first group (the name) and replaces the rest; with
    ``quoted``, a quoted value keeps its quotes, so JSON and YAML still read as such."""

    def replace(m: re.Match[str]) -> str:
        value = m[0][len(m[1]) :]
        quote = value[0] if quoted and value[:1] in ("'", '"') else ""
        return m[1] + quote + REDACTED + quote

    return Rule(SECRET, re.compile(pattern), replace, needle, lines)


def _name_pattern(name: str) -> re.Pattern[str]:
    """A user or host name, at word boundaries; common words only in telling contexts."""
    n = re.escape(name)
    if _is_distinctive(name):
        return re.compile(rf"(?<![\w-]){n}(?![\w-]|\.\w)")
    # Only where it can only be a name: a home directory, user@host, an assignment, or a
    # quoted value such as platform.uname()'s node='jax'.
    contexts = (
        rf"(?:(?<=/home/)|(?<=/Users/)|(?<=\\Users\\)){n}(?![\w.-])",
        rf"(?<![\w.-]){n}(?=@)",
        rf"(?<=@){n}(?![\w-]|\.\w)",
        rf"(?i:(?<=\buser=)|(?<=\blogname=)|(?<=\bnode=)|(?<=\bhost=)|(?<=\bhostname=)){n}\b",
        rf"""(?<=(?P<q>['"])){n}(?=(?P=q))""",
    )
    return re.compile("|".join(f"(?:{c})" for c in contexts))


def _constant(placeholder: str) -> Callable[[re.Match[str]], str]:
    return lambda m: placeholder
