"""``collect --include-source``: the command's main script, redacted, into the bundle.

Off by default: a script is the user's own work and may say more than the HLO does. What is
shipped is the same text the other files get, through the same ``Redactor``, cut to
``SOURCE_LIMIT`` bytes.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit.redact import Redactor

SOURCE_DIR = "source"
SOURCE_LIMIT = 256 * 1024  # bytes of the script kept; the failing part is rarely further down
_SCRIPT_SUFFIXES = (".py", ".sh")
# Python options whose next argument is no script (python -W error x.py, python -X dev x.py).
_PYTHON_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "-Q"})


@dataclass(frozen=True)
class Source:
    """The script put in the bundle (``arcname``), or why none was (``note``)."""

    arcname: str | None
    note: str | None
    counts: Counter[str]  # what the redactor replaced


def main_script(command: Sequence[str], cwd: Path) -> Path | None:
    """The script ``command`` runs: ``python train.py`` -> train.py, ``./run.sh`` -> run.sh.

    None for ``python -c ...`` and ``python -m module`` (no file named on the command line)
    and for commands that name no existing ``.py`` or ``.sh`` file.
    """
    skip_next = False
    for i, arg in enumerate(command):
        if skip_next:
            skip_next = False
            continue
        if i > 0 and arg in ("-c", "-m"):
            return None
        if arg in _PYTHON_OPTIONS_WITH_VALUE:
            skip_next = True
            continue
        path = cwd / arg
        if arg.endswith(_SCRIPT_SUFFIXES) and path.is_file():
            return path
    return None


def add_source(stage: Path, command: Sequence[str], redactor: Redactor, cwd: Path) -> Source:
    """Copy the command's main script, redacted and size-capped, to ``source/`` in ``stage``."""
    script = main_script(command, cwd)
    if script is None:
        return Source(None, "--include-source: the command names no .py or .sh script", Counter())
    try:
        with script.open("rb") as f:
            raw = f.read(SOURCE_LIMIT + 1)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        return Source(None, f"--include-source: cannot read the script ({e.strerror})", Counter())
    # The name is redacted too, and kept to characters every archive format takes plainly.
    name = re.sub(r"[^\w.-]", "_", redactor.text(script.name)).lstrip(".") or "script"
    arcname = f"{SOURCE_DIR}/{name}"
    text = raw[:SOURCE_LIMIT].decode("utf-8", "replace")
    note = None
    if len(raw) > SOURCE_LIMIT:
        text = text[: text.rfind("\n") + 1]  # whole lines only
        note = f"{arcname} holds only the first {SOURCE_LIMIT // 1024} kB of the script"
        text += f"# [... {size - len(text.encode())} more bytes not included ...]\n"
    redacted, counts = redactor.text_with_report(text)
    target = stage / arcname
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(redacted, "utf-8")
    return Source(arcname, note, counts)
