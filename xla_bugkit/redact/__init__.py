"""Redaction of home paths, user and host names, and secrets before anything goes public.

A bug bundle is attached to a public GitHub issue, so every text that enters it (logs, HLO
text dumps, the environment report, the command line) passes through a :class:`Redactor`.
Binary protos are never rewritten as text (a changed length corrupts them): home paths in
them are rewritten at the same length (:meth:`Redactor.copy_binary`), and for the rest the
caller asks :meth:`Redactor.find_in_bytes` and warns instead.

``patterns`` says what counts as private, ``command`` finds the secrets on a command line,
``rules`` compiles one machine's rules, ``redactor`` applies them to text and ``binary`` to
binary data.
"""

from __future__ import annotations

from xla_bugkit.redact.command import command_note, command_secrets
from xla_bugkit.redact.patterns import (
    HOME,
    HOME_PATH,
    HOST,
    HOST_NAME,
    REDACTED,
    SECRET,
    USER,
    USER_NAME,
    is_reportable_env_name,
)
from xla_bugkit.redact.redactor import Redactor, summarize

__all__ = [
    "HOME",
    "HOME_PATH",
    "HOST",
    "HOST_NAME",
    "REDACTED",
    "SECRET",
    "USER",
    "USER_NAME",
    "Redactor",
    "command_note",
    "command_secrets",
    "is_reportable_env_name",
    "summarize",
]
