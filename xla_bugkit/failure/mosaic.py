"""A Pallas kernel that Mosaic (the TPU kernel compiler) refused, as its error says it.

jax prints, for a kernel Mosaic cannot compile::

    ... Mosaic failed to compile TPU kernel: E2003: CompileTimeMosaicUnproven...: cannot ...
    See https://openxla.org/xla/errors/error_2003 for more details.

    at location: loc("get:"("get/get"(callsite("window_kernel"("/path/prog.py":14:17 ...

The code and its page name the error; the location names the kernel and its source line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ERROR = re.compile(
    r"Mosaic failed to compile TPU kernel: "
    r"(?:(?P<code>E\d{4}): (?P<name>\w+): )?(?P<message>[^\n]*)"
)
_PAGE = re.compile(r"See (?P<page>https://openxla\.org/xla/errors/error_\d+)")
_LOCATION = re.compile(
    r'at location: loc\(.*?callsite\("(?P<kernel>[^"]+)"\("(?P<file>[^"]+)":(?P<line>\d+)'
)
_MESSAGE_CHARS = 200


@dataclass(frozen=True)
class MosaicError:
    """What Mosaic said of the kernel it refused."""

    code: str | None  # "E2003"
    name: str | None  # "CompileTimeMosaicUnprovenMemoryAccessAlignment"
    message: str  # "cannot statically prove that index in dimension 1 is a multiple of 128"
    page: str | None  # "https://openxla.org/xla/errors/error_2003"
    kernel: str | None  # "window_kernel"
    source: str | None  # "prog.py:14" (the file's name only: its folder is the user's)

    def line(self) -> str:
        """One line: "Mosaic E2003 (NAME) in window_kernel (prog.py:14): ...; see PAGE"."""
        what = f"Mosaic {self.code} ({self.name})" if self.code else "Mosaic"
        where = f" in {self.kernel}" if self.kernel else ""
        where += f" ({self.source})" if self.source else ""
        see = f"; see {self.page}" if self.page else ""
        return f"{what}{where}: {self.message}{see}"


def find(output: str) -> MosaicError | None:
    """The first Mosaic compile error in a program's output that names its code (jax prints
    one error twice, as its own and as the MosaicError that wraps it), or None."""
    errors = list(_ERROR.finditer(output))
    if not errors:
        return None
    m = next((e for e in errors if e["code"]), errors[0])
    after = output[m.end() : m.end() + 4000]
    page = _PAGE.search(after)
    location = _LOCATION.search(after)
    message = m["message"].strip()
    if len(message) > _MESSAGE_CHARS:
        message = message[:_MESSAGE_CHARS].rsplit(" ", 1)[0] + "…"
    return MosaicError(
        code=m["code"],
        name=m["name"],
        message=message,
        page=page["page"] if page else None,
        kernel=location["kernel"] if location else None,
        source=f"{location['file'].rsplit('/', 1)[-1]}:{location['line']}" if location else None,
    )
