"""Redaction of home paths, user and host names, and secrets before anything goes public.

A bug bundle is attached to a public GitHub issue, so every text that enters it (logs, HLO
text dumps, the environment report, the command line) passes through a :class:`Redactor`.
Binary protos are never rewritten as text (a changed length corrupts them): their string
fields are found by structure (``schemas``), redacted as text and written back with their new
lengths (:meth:`Redactor.copy_binary`); what is anywhere else in them is reported by kind, for
the bundle's notes (:func:`left_note`).

``patterns`` says what counts as private, ``command`` finds the secrets on a command line and
``environ`` those in the environment, ``rules`` compiles one machine's rules with the cheap
tests of ``needles``, ``redactor`` applies them to text, and ``binary`` to binary files,
which ``walk`` follows along the field paths of ``schemas``.
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
from xla_bugkit.redact.redactor import Redactor, left_note, summarize

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
    "left_note",
    "summarize",
]
