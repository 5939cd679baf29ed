"""Is a bundle's repro.py the script xla-bugkit writes, or was it edited? ISSUE.md tells a
maintainer to run it, and it is a stranger's file.

The script is this version's template with each setting filled in. A bundled one passes when
it is exactly that template, every setting on its one line is a plain Python literal of the
right kind (a path inside the bundle for the module and snapshot), and the recorded flags it
would apply are ones a replay admits (none can name a file). Anything else is an edit, or
another version's script: the verdict says which, and never runs a line of it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from xla_bugkit._version import __version__
from xla_bugkit.bundle import issue
from xla_bugkit.hlo import flags

# How each setting of the template may be filled: a check of its literal value.
_SETTINGS: dict[str, Callable[[Any], bool]] = {
    "module": lambda v: isinstance(v, str) and _inside(v),
    "encodings": lambda v: (
        isinstance(v, dict)
        and all(isinstance(k, int) and isinstance(e, tuple) and len(e) == 3 for k, e in v.items())
    ),
    "inputs_note": lambda v: isinstance(v, str),
    "flags": lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
    "tpu_args": lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
    "platform": lambda v: isinstance(v, str) and re.fullmatch(r"[a-z]+", v) is not None,
    "saw": lambda v: isinstance(v, str),
    "expect": lambda v: isinstance(v, str),
    "reference": lambda v: isinstance(v, str),
    "hang_seconds": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "memory_cap": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0),
}
# Settings that are not literals: the version (in the docstring), the label (in a comment)
# and the snapshot ("None" or "HERE / 'path'").
_VERSION = r"[\w.+-]+"
_LABEL = r"[\w.-]+"
_SNAPSHOT = re.compile(r"None|HERE / (?P<path>'[^'\\\n\r]*')")


def check(text: str) -> str | None:
    """None when ``text`` is this version's repro.py with its settings filled in as the
    module docstring says; otherwise why it is not (one line)."""
    found = _pattern().fullmatch(text)
    if found is None:
        written = re.search(r"Written by xla-bugkit (\S+?)\.\s", text)
        if written and written.group(1) != __version__:
            return f"written by xla-bugkit {written.group(1)}, not this {__version__}: not checked"
        return "it is not the script xla-bugkit writes: it was edited"
    if found["version"] != __version__:
        return f"written by xla-bugkit {found['version']}, not this {__version__}: not checked"
    snapshot = _SNAPSHOT.fullmatch(found["snapshot"])
    if snapshot is None or (snapshot["path"] and not _inside(ast.literal_eval(snapshot["path"]))):
        return "its SNAPSHOT is not a file inside the bundle"
    for name, valid in _SETTINGS.items():
        try:
            value = ast.literal_eval(found[name])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return f"its {name.upper()} setting is not a plain value"
        if not valid(value):
            return f"its {name.upper()} setting is not one xla-bugkit writes"
    withheld = (
        *flags.admit(ast.literal_eval(found["flags"])).withheld,
        *flags.admit_tpu(ast.literal_eval(found["tpu_args"])).withheld,
    )
    if withheld:
        return f"it would apply {withheld[0]}"
    return None


def _inside(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and "\\" not in path


@functools.cache
def _pattern() -> re.Pattern[str]:
    """The template as a pattern: its text as written, each setting one line of anything."""
    template = issue.load_template("repro.py.in").template
    parts = re.split(r"\$(\w+)", template)
    pattern = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            pattern.append(re.escape(part))
        elif part == "version":
            pattern.append(f"(?P<version>{_VERSION})")
        elif part == "label":
            pattern.append(f"(?P<label>{_LABEL})")
        else:
            pattern.append(f"(?P<{part}>[^\\n\\r]*)")
    return re.compile("".join(pattern), re.S)
