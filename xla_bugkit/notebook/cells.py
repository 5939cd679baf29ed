"""The notebook's code cells as one Python script that a fresh process can run."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

# What IPython turns magics and shell escapes into: only a kernel can run these lines.
_IPYTHON_ONLY = re.compile(r"\bget_ipython\(\)")


def script(
    cells: Mapping[int, str], transform: Callable[[str], str], *, upto: int | None = None
) -> str:
    """The cells (execution count -> source) in the order they ran, up to and including
    ``upto``, as one script. Magics and shell escapes become ``pass`` with the line kept in a
    comment, so indented blocks stay valid; cell magics (``%%time``...) leave the whole cell
    out."""
    parts = []
    for count in sorted(cells):
        if upto is not None and count > upto:
            break
        source = cells[count]
        if not source.strip():
            continue
        if source.lstrip().startswith("%%"):
            parts.append(f"# In[{count}]: left out (a cell magic, IPython only)\n")
            continue
        parts.append(f"# In[{count}]:\n{_plain(transform(source))}\n")
    return "\n".join(parts)


def _plain(code: str) -> str:
    lines = []
    for line in code.splitlines():
        if _IPYTHON_ONLY.search(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}pass  # left out (IPython only): {line.strip()}")
        else:
            lines.append(line)
    return "\n".join(lines)
