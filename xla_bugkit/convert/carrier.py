"""The module as metadata-free text, for a jaxlib release that cannot read its proto.

A ``.hlo.pb`` written by a recent jaxlib is read by releases back to 0.6; 0.4.38 rejects it
("Instruction with id > INT_MAX"), and the text as dumped does not parse there either (its
``FileNames``/``StackFrames`` tables are newer). The same module printed without metadata by
the installed jaxlib parses on every release tried. The replay child reads the proto first,
and the text only where its jaxlib cannot (``worker``), saying so.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from xla_bugkit import convert
from xla_bugkit.errors import BugkitError
from xla_bugkit.replay import ReplayInput


@contextlib.contextmanager
def with_text(inp: ReplayInput, say: Callable[[str], None]) -> Iterator[ReplayInput]:
    """``inp`` with its module as metadata-free text (``ReplayInput.hlo_text``), printed by
    the installed jaxlib in a child into a temporary folder that lasts as long as the block;
    when that text cannot be made, ``inp`` as it was (the proto alone), and ``say`` why."""
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-text-") as folder:
        out = Path(folder) / f"{inp.name}.short.txt"
        try:
            convert.convert(inp.hlo, out, to="hlo-short", force=True)
        except (BugkitError, OSError) as e:
            say(f"no metadata-free text of {inp.name} for older releases: {e}")
            yield inp
        else:
            yield replace(inp, hlo_text=out)
