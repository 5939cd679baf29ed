"""Secret values on the command line: what ``--password``, ``--token`` and their kind hold,
so that the redactor can take them out of every text, and the note that names them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xla_bugkit.redact.patterns import OPTION_VALUE, SECRET_OPTION


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
        if SECRET_OPTION.fullmatch(arg) and follows and not follows.startswith("-"):
            found.append((arg, follows))
        for m in re.finditer(OPTION_VALUE, arg):
            name = m[1].split("=")[0].strip(" '\",")
            found.append((name, _unquote(m["value"])))
    return [(name, value) for name, value in found if value]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
