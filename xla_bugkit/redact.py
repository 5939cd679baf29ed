"""Redaction of home paths, user and host names, and secrets before anything goes public.

A bug bundle is attached to a public GitHub issue, so every text that enters it (logs, HLO
text dumps, the environment report, the command line) passes through a :class:`Redactor`.
Binary protos are never rewritten (a changed length corrupts them); the caller asks
:meth:`Redactor.find_in_bytes` and warns instead.
"""

from __future__ import annotations

import getpass
import os
import platform
import re
import shutil
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOME = "~"
USER = "<USER>"
HOST = "<HOST>"
REDACTED = "<REDACTED>"

# Counter keys of text_with_report(); summarize() turns them into "2 home paths, 1 secret".
HOME_PATH = "home path"
USER_NAME = "user name"
HOST_NAME = "host name"
SECRET = "secret"

# Environment variables worth showing in a bug report; everything else is dropped.
_ENV_PREFIXES = (
    *("JAX_", "XLA_", "NVIDIA_", "CUDA_", "TPU_", "LIBTPU_", "PJRT_", "NCCL_"),
    # TensorFlow's, not all of TF_*: Terraform uses TF_VAR_* and TF_CLI_* for its own settings.
    *("TF_CPP_", "TF_XLA_", "TF_GPU_", "TF_FORCE_", "TF_ENABLE_"),
)
_ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "LD_LIBRARY_PATH",  # CUDA library mix-ups are a common cause of GPU failures
        "ENABLE_PJRT_COMPATIBILITY",
    }
)
_SECRET_WORDS = "TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE"
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)

# Names that are also ordinary words (or identify nobody): replacing them everywhere would
# turn "import jax" into "import <USER>", so they are only replaced in telling contexts.
_COMMON_WORDS = (
    "root admin administrator user users jax xla test tests home guest dev data main default "
    "worker python docker build jenkins runner app nobody local node server host gpu cpu tpu "
    "linux ubuntu debian centos colab kaggle ec2-user opt tmp work"
)
_COMMON_NAMES = frozenset(_COMMON_WORDS.split())
# Host names that identify nobody; not worth redacting at all.
_TRIVIAL_HOSTS = frozenset({"", "localhost", "localhost.localdomain", "(none)", "ip6-localhost"})
# Homes that are shared system directories: rewriting them to ~ would mislead, not protect.
_SYSTEM_DIRS = frozenset({"/", "/tmp", "/var", "/usr", "/opt", "/nonexistent", "/home"})

# Well-known token shapes. Each is specific enough that a false positive is unlikely. With
# each, a text every match contains: most texts lack it, and a substring test is ~20x faster.
_TOKEN_PATTERNS = (
    (r"\bgh[pousr]_[A-Za-z0-9]{20,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (r"\bgithub_pat_[A-Za-z0-9_]{20,}", "github_pat_"),
    (r"\bglpat-[A-Za-z0-9_-]{20,}", "glpat-"),
    (r"\bhf_[A-Za-z0-9]{20,}", "hf_"),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("AKIA", "ASIA")),
    (r"\bsk-[A-Za-z0-9_-]{20,}", "sk-"),
    (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "xox"),
    (r"\bya29\.[A-Za-z0-9_-]{20,}", "ya29."),
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----", "-----BEGIN"),
)
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)"""
# NAME=value (shell, env dumps, flags) and "name": "value" (JSON) where NAME looks secret.
# No spaces around "=": HLO text has "%token.1 = token[] after-all()", which is no secret.
_ASSIGN = rf"(?i)(\b[\w.-]*(?:{_SECRET_WORDS})[\w.-]*=)(?!{REDACTED}){_VALUE}"
_JSON = rf"""(?i)("[\w.-]*(?:{_SECRET_WORDS})[\w.-]*"\s*:\s*)"[^"\n]*\""""
_BEARER = r"(?i)(\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/-]{16,}=*"
# Command-line options whose value is a secret: "--password hunter2", "--hf-token X". The
# option's last word decides, so "--max-tokens 128", "--tokenizer t5" and "--token-file F"
# keep their values.
_OPTION = (
    r"--?(?:[a-z0-9]+[-_.])*"
    r"(?:password|passwd|token|secret|auth|credentials?|(?:api|secret|access|private)[-_]?key)"
)
_SECRET_OPTION = re.compile(_OPTION, re.IGNORECASE)
# The same option followed by its value in text: a shell command line, or Python's repr of
# sys.argv ("'--token', 'abc'"). The value is not itself an option.
_OPTION_VALUE = (
    rf"""(?i)((?<![\w-]){_OPTION}(?:\s+|=|(?P<q>['"]),\s*(?P=q)))"""
    rf"(?!-|{REDACTED})(?P<value>{_VALUE})"
)
# Values of secret options too plain to hunt for in every text ("--auth off"); they are still
# redacted where they follow their option.
_PLAIN_VALUES = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "basic", "bearer", "default"}
)
_URL_CREDENTIALS = r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+(@)"


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]
    # What every match contains (or a test that is true of every text with a match): a text
    # without it is skipped. Lookbehind alternations cost ~0.3 s per MB of HLO text, where a
    # substring test costs ~1 ms.
    needle: str | tuple[str, ...] | Callable[[str], bool] | None = None  # a tuple: any of them

    def may_match(self, s: str) -> bool:
        if self.needle is None:
            return True
        if isinstance(self.needle, str):
            return self.needle in s
        if isinstance(self.needle, tuple):
            return any(n in s for n in self.needle)
        return self.needle(s)


@dataclass(frozen=True, init=False)
class Redactor:
    """Replaces this machine's home paths, user and host names, and secrets in text.

    Build one with :meth:`for_this_machine`; tests pass explicit values.
    """

    home: tuple[str, ...]
    user: tuple[str, ...]
    host: tuple[str, ...]
    secrets: tuple[str, ...] = field(repr=False)  # known secret values, replaced everywhere
    _rules: tuple[_Rule, ...] = field(repr=False, compare=False)

    def __init__(
        self,
        *,
        home: str | Iterable[str] = (),
        user: str | Iterable[str] = (),
        host: str | Iterable[str] = (),
        secrets: Iterable[str] = (),
    ) -> None:
        homes = _clean(home, lambda h: h.rstrip("/\\") or h, _is_private_home)
        users = _clean(user, str.strip, bool)
        hosts = _clean(host, lambda h: h.strip().rstrip("."), lambda h: h not in _TRIVIAL_HOSTS)
        known = _clean(secrets, lambda v: v, bool)
        object.__setattr__(self, "home", homes)
        object.__setattr__(self, "user", users)
        object.__setattr__(self, "host", hosts)
        object.__setattr__(self, "secrets", known)
        object.__setattr__(self, "_rules", _build_rules(homes, users, hosts, known))

    @classmethod
    def for_this_machine(
        cls, command: Sequence[str] = (), private: Iterable[Path] = ()
    ) -> Redactor:
        """A redactor for the current user's home, user names and host names, and for the
        secret values on ``command`` (the values of "--password", "--token", ...).

        ``private`` folders (the run's work dir) are written as ``~`` too where they are not
        under a home already: XLA writes the dump folder into what it dumps.
        """
        homes: list[str] = []
        for candidate in (lambda: str(Path.home()), lambda: str(Path.home().resolve())):
            homes.extend(_quietly(candidate))
        homes.extend(os.environ.get(n, "") for n in ("HOME", "USERPROFILE"))
        for folder in private:
            for form in {str(folder.absolute()), str(folder.resolve())}:
                if not any(h and (form + "/").startswith(h.rstrip("/") + "/") for h in homes):
                    homes.append(form)
        users = [*_quietly(getpass.getuser)]
        users.extend(os.environ.get(n, "") for n in ("USER", "LOGNAME", "USERNAME"))
        hosts = [*_quietly(socket.gethostname), *_quietly(platform.node)]
        hosts.extend(_quietly(socket.getfqdn))
        # Short and fully qualified forms both leak; "box.corp.example" also as "box".
        hosts.extend(h.split(".", 1)[0] for h in list(hosts))
        return cls(home=homes, user=users, host=hosts, secrets=command_secrets(command))

    def text(self, s: str) -> str:
        """``s`` with home paths, user and host names, and secrets replaced."""
        return self.text_with_report(s)[0]

    def text_with_report(self, s: str) -> tuple[str, Counter[str]]:
        """Redacted ``s`` and how many of each kind (HOME_PATH, USER_NAME, ...) were replaced."""
        counts: Counter[str] = Counter()
        s = _apply(self._rules, s, lambda kind, hit: counts.update((kind,)))
        return s, counts

    def text_bytes(self, b: bytes) -> bytes:
        """Redact a UTF-8 text file handled as bytes; never use this on binary protos."""
        return self.text(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def find_in_bytes(self, b: bytes) -> list[str]:
        """The sensitive strings found in binary ``b``, sorted; secrets shown masked.

        Meant for a local warning ("model.hlo.pb contains /home/alice"), not for the bundle.
        """
        # latin-1 maps each byte to one character, so the text rules scan binary data as is;
        # the needles are converted the same way so that non-ASCII names still match.
        found: set[str] = set()

        def note(kind: str, hit: str) -> None:
            hit = hit.encode("latin-1").decode("utf-8", "replace")
            found.add(hit[:4] + "…" if kind == SECRET else hit)

        # Rules run in turn on the rewritten copy, as in text(), so "/home/alice" is reported
        # once as a home path and not again as the user name inside it.
        _apply(_binary_rules(self), b.decode("latin-1"), note)
        return sorted(found)

    def copy_binary(self, src: Path, dst: Path, *, chunk: int = 8 << 20) -> int:
        """Copy a binary proto, rewriting home paths in place; returns how many were rewritten.

        ``/home/alice/proj/x.py`` becomes ``~//////////proj/x.py``: the same length, so every
        protobuf length prefix stays valid, and still the same path once read (repeated
        slashes are one). Streams, so a large snapshot is never held in memory.
        """
        needles = [(h + "/").encode() for h in self.home]
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

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The allowlisted, non-secret variables of ``environ`` with redacted values, sorted."""
        return {
            name: self.text(value)
            for name, value in sorted(environ.items())
            if is_reportable_env_name(name)
        }


def is_reportable_env_name(name: str) -> bool:
    """True for variables a bug report should show (JAX_*, XLA_*, ...) unless they look secret."""
    allowed = name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES
    return allowed and not _SECRET_NAME.search(name)


def command_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """The values of secret-looking options in ``argv``: ``--token abc``, ``--token=abc``,
    and the same inside one argument (``bash -c "python x.py --token abc"``)."""
    return tuple(dict.fromkeys(value for _, value in _secret_options(argv)))


def command_note(argv: Sequence[str]) -> str | None:
    """What redaction takes out of the command line, for the bundle's notes: ``"redacted:
    the command line's values of --password, --token"``; None when nothing."""
    names = dict.fromkeys(name for name, _ in _secret_options(argv))
    # The names end the note: an option followed by a word would be redacted as one.
    return f"redacted: the command line's values of {', '.join(names)}" if names else None


def _secret_options(argv: Sequence[str]) -> list[tuple[str, str]]:
    """(option, value) of each secret-looking option in ``argv``, in order."""
    found: list[tuple[str, str]] = []
    for i, arg in enumerate(argv):
        follows = argv[i + 1] if i + 1 < len(argv) else ""
        if _SECRET_OPTION.fullmatch(arg) and follows and not follows.startswith("-"):
            found.append((arg, follows))
        for m in re.finditer(_OPTION_VALUE, arg):
            name = m[1].split("=")[0].strip(" '\",")
            found.append((name, _unquote(m["value"])))
    return [(name, value) for name, value in found if value]


def summarize(counts: Counter[str]) -> str:
    """Say what was redacted: ``"3 home paths, 1 host name, 1 secret"``; ``""`` for nothing."""
    order = (HOME_PATH, USER_NAME, HOST_NAME, SECRET)
    kinds = [*order, *sorted(k for k in counts if k not in order)]
    return ", ".join(f"{counts[k]} {k}{'' if counts[k] == 1 else 's'}" for k in kinds if counts[k])


def _apply(rules: Iterable[_Rule], s: str, on_hit: Callable[[str, str], None]) -> str:
    for rule in rules:
        if not rule.may_match(s):
            continue

        def replace(m: re.Match[str], rule: _Rule = rule) -> str:
            on_hit(rule.kind, m[0])
            return rule.replace(m)

        s = rule.pattern.sub(replace, s)
    return s


def _quietly(get: Callable[[], str]) -> list[str]:
    # Each source can fail in containers (no passwd entry, no DNS); missing ones are skipped.
    try:
        return [get()]
    except (OSError, KeyError, RuntimeError):
        return []


def _clean(
    values: str | Iterable[str], norm: Callable[[str], str], keep: Callable[[str], bool]
) -> tuple[str, ...]:
    items = [values] if isinstance(values, str) else list(values)
    out = {norm(v) for v in items if v}
    # Longest first, so "/home/alice/work" wins over "/home/alice" and "box.corp" over "box".
    return tuple(sorted((v for v in out if keep(v)), key=lambda v: (-len(v), v)))


def _is_private_home(home: str) -> bool:
    return bool(home) and os.path.normpath(home) not in _SYSTEM_DIRS


def _is_distinctive(name: str) -> bool:
    return len(name) >= 4 and name.lower() not in _COMMON_NAMES


def _build_rules(
    homes: tuple[str, ...], users: tuple[str, ...], hosts: tuple[str, ...], secrets: tuple[str, ...]
) -> tuple[_Rule, ...]:
    # Secrets first: a token may contain a user name and must vanish whole.
    rules = [_secret_rule(p, needle) for p, needle in _TOKEN_PATTERNS]
    rules += _known_secret_rules(secrets)
    rules += [
        _keep_prefix_rule(_OPTION_VALUE, needle=_may_be_secret_option),
        _keep_prefix_rule(_ASSIGN, needle=_may_assign_secret),
        _keep_prefix_rule(_JSON),
        _keep_prefix_rule(_BEARER, needle=_may_be_bearer),
    ]
    url = re.compile(_URL_CREDENTIALS)
    rules.append(_Rule(SECRET, url, lambda m: m[1] + REDACTED + m[2], needle="://"))
    # A path may not continue into a longer name ("/home/alice2", "/home/alice.bak").
    end = r"(?![\w-]|\.\w)"
    for home in homes:
        pattern = re.compile(rf"(?<![\w.~-]){re.escape(home)}{end}")
        rules.append(_Rule(HOME_PATH, pattern, _constant(HOME), needle=home))
    names = [(h, HOST_NAME, HOST) for h in hosts] + [(u, USER_NAME, USER) for u in users]
    for name, kind, placeholder in sorted(names, key=lambda t: -len(t[0])):
        rules.append(_Rule(kind, _name_pattern(name), _constant(placeholder), needle=name))
    return tuple(rules)


def _known_secret_rules(secrets: tuple[str, ...]) -> list[_Rule]:
    """Known secret values: a text that is one (an argument of the command) always; inside
    other text wherever it stands as a word, unless it is too plain a word to hunt for."""
    if not secrets:
        return []
    exact = "|".join(re.escape(v) for v in secrets)
    rules = [_Rule(SECRET, re.compile(rf"\A(?:{exact})\Z"), _constant(REDACTED))]
    wide = [re.escape(v) for v in secrets if _worth_hunting(v)]
    if wide:
        pattern = re.compile(rf"(?<!\w)(?:{'|'.join(wide)})(?!\w)")
        rules.append(_Rule(SECRET, pattern, _constant(REDACTED)))
    return rules


def _worth_hunting(value: str) -> bool:
    # "1", "off" or "main" everywhere would shred the text (and the module.mlir that replay
    # reads); a short number is no secret worth that.
    if len(value) < 3 or value.lower() in _PLAIN_VALUES | _COMMON_NAMES:
        return False
    return not (value.isdigit() and len(value) < 6)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _secret_rule(pattern: str, needle: str | tuple[str, ...]) -> _Rule:
    return _Rule(SECRET, re.compile(pattern), _constant(REDACTED), needle)


def _keep_prefix_rule(pattern: str, needle: Callable[[str], bool] | None = None) -> _Rule:
    def replace(m: re.Match[str]) -> str:
        quote = '"' if m[0].endswith('"') and pattern == _JSON else ""
        return m[1] + quote + REDACTED + quote

    return _Rule(SECRET, re.compile(pattern), replace, needle)


_SECRET_WORDS_LOWER = tuple(_SECRET_WORDS.lower().split("|"))
_ASSIGN_TAIL = re.compile(r"[\w.-]*=")


def _may_assign_secret(s: str) -> bool:
    r"""False only when ``_ASSIGN`` cannot match: no secret word followed by ``[\w.-]*=``.

    Finding the words with ``str.find`` in a lowered copy is ~10x faster than any regex for
    them. Lowering matches ``(?i)`` exactly only on ASCII text, so other text always passes.
    """
    if not s.isascii():
        return True
    low = s.lower()
    for word in _SECRET_WORDS_LOWER:
        at = low.find(word)
        while at >= 0:
            if _ASSIGN_TAIL.match(low, at + len(word)):
                return True
            at = low.find(word, at + 1)
    return False


# What every _OPTION_VALUE match holds, in lowered text: a dash, option characters, a word.
_OPTION_NEEDLE = re.compile(r"-[a-z0-9_.-]*(?:password|passwd|token|secret|auth|credential|key)")


def _may_be_secret_option(s: str) -> bool:
    """False only when ``_OPTION_VALUE`` cannot match (same lowering rule as above)."""
    return not s.isascii() or _OPTION_NEEDLE.search(s.lower()) is not None


def _may_be_bearer(s: str) -> bool:
    """False only when ``_BEARER`` cannot match (same lowering rule as above)."""
    if not s.isascii():
        return True
    low = s.lower()
    return "bearer" in low or "basic" in low


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


def _binary_rules(r: Redactor) -> list[_Rule]:
    def conv(values: tuple[str, ...]) -> list[str]:
        return [v.encode("utf-8").decode("latin-1") for v in values]

    twin = Redactor(
        home=conv(r.home), user=conv(r.user), host=conv(r.host), secrets=conv(r.secrets)
    )
    # In binary data a byte like 0xff is no letter: word boundaries must be ASCII ones.
    return [
        _Rule(rule.kind, re.compile(rule.pattern.pattern, _ascii(rule.pattern.flags)), rule.replace)
        for rule in twin._rules
    ]


def _ascii(flags: int) -> int:
    return (flags & ~re.UNICODE) | re.ASCII
