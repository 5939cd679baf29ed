"""XLA_FLAGS as the hook edits it inside the program: collect's flags kept in it until XLA
reads it (``keep``), the dump folder moved to a process's own (``own_dump_flags``), and the
folder a value dumps to (``dump_dir_of``).

Loaded by file path, as the recorder is (standard library only), by the recorder when a
framework is imported and by the patches when jax starts its first backend.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any


def keep(recorder: Any) -> None:
    """Put collect's XLA flags back into XLA_FLAGS when the program's value lacks its
    dump folder: it replaced them, or collect left XLA_FLAGS unset so that the program's
    own ``os.environ.setdefault("XLA_FLAGS", ...)`` works as it does bare. Collect's come
    first, so the program's own flags win where the two set the same one. Called before
    jax starts its first backend, or when TensorFlow is imported (XLA reads XLA_FLAGS
    once, when it starts)."""
    ours = os.environ.get("XLA_BUGKIT_XLA_FLAGS")
    root = os.environ.get("XLA_BUGKIT_DUMP_DIR")
    if not ours or not root:
        return
    value = os.environ.get("XLA_FLAGS", "")
    value, theirs = _without_dump_dirs_besides(value, root)
    if theirs:
        # The program's own dump folder: XLA writes into collect's instead, and the
        # user's folder is left as it was (collect says where its dumps went).
        recorder.write("dump_to_replaced", folder=os.path.abspath(theirs[-1]))
        os.environ["XLA_FLAGS"] = value
    if _dumps_under(value, root):
        return  # ours, or a process's own folder under ours (``jax_backend``)
    os.environ["XLA_FLAGS"] = f"{ours} {value}".strip()
    if value:
        recorder.write("flags_kept", program=value)


def dump_dir_of(value: str) -> str | None:
    """The folder ``--xla_dump_to`` names in an XLA_FLAGS value (the last one wins)."""
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    found = None
    for word in words:
        if word.startswith("--xla_dump_to="):
            found = word.split("=", 1)[1]
    return found


_DUMP_TO = re.compile(r"""(?:^|(?<=\s))--xla_dump_to=("[^"]*"|'[^']*'|\S*)""")


def _without_dump_dirs_besides(value: str, root: str) -> tuple[str, list[str]]:
    """``value`` (XLA_FLAGS) without the ``--xla_dump_to`` flags that name a folder outside
    ``root``, and those folders, in order."""
    theirs: list[str] = []

    def drop(m: re.Match[str]) -> str:
        folder = m.group(1).strip("\"'")
        if _inside(folder, root):
            return m.group(0)
        theirs.append(folder)
        return ""

    kept = _DUMP_TO.sub(drop, value)
    return (kept.strip() if theirs else value), theirs


def _dumps_under(value: str, root: str) -> bool:
    """Whether an XLA_FLAGS value's ``--xla_dump_to`` is ``root`` or a folder inside it."""
    dump_to = dump_dir_of(value)
    return dump_to is not None and _inside(dump_to, root)


def _inside(folder: str, root: str) -> bool:
    """Whether ``folder`` is ``root`` or a folder inside it."""
    folder, root = os.path.normpath(folder), os.path.normpath(root)
    return folder == root or folder.startswith(root + os.sep)


def own_dump_flags(value: str, ours: str, new: str) -> str:
    """``value`` (XLA_FLAGS) with collect's ``--xla_dump_to=ours`` moved to ``new``;
    unchanged when the program replaced it with a folder of its own."""
    for old in (f"--xla_dump_to={ours}", f"--xla_dump_to={shlex.quote(ours)}"):
        pattern = re.compile(re.escape(old) + r"(?=\s|$)")
        if pattern.search(value):
            return pattern.sub(lambda _: f"--xla_dump_to={_quoted(new)}", value, count=1)
    return value


def _quoted(path: str) -> str:
    return shlex.quote(path) if " " in path else path
