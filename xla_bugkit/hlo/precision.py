"""Matmul precision in HLO text: which dots and convolutions run at the platform's default,
and the same module with every one at ``HIGHEST``.

A TPU runs a float32 dot at the default precision as one bfloat16 pass (inputs rounded to 8
bits of mantissa): results then differ from float32 arithmetic by about 1e-2 relative, by
design. jax asks for more with ``precision=HIGHEST`` (or ``jax.default_matmul_precision``),
which HLO text records as ``operand_precision={highest,highest}``.
"""

from __future__ import annotations

import re

# An instruction line whose op is a dot or a convolution: "%d = f32[..] dot(%a, %b), ...".
_OP = re.compile(r"^(?P<head>\s*(?:ROOT\s+)?%?[\w.\-]+ = .*?\s(?:dot|convolution)\()", re.M)
_PRECISION = re.compile(r"operand_precision=\{[^}]*\}")
_HIGHEST = "operand_precision={highest,highest}"
_FLOATS = re.compile(r"\b(?:f32|f64|c64|c128)\[")


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each dot or convolution line on floats wider than bf16."""
    spans = []
    for m in _OP.finditer(text):
        end = text.find("\n", m.start())
        end = len(text) if end < 0 else end
        if _FLOATS.search(text, m.start(), end):
            spans.append((m.start(), end))
    return spans


def at_default(text: str) -> int:
    """How many float32 (or wider) dots and convolutions run at the default precision."""
    count = 0
    for start, end in _lines(text):
        found = _PRECISION.search(text, start, end)
        if found is None or "highest" not in found.group(0).lower():
            count += 1
    return count


def at_highest(text: str) -> str:
    """``text`` with every float dot and convolution at ``HIGHEST`` precision."""
    out, at = [], 0
    for start, end in _lines(text):
        line = text[start:end]
        if _PRECISION.search(line):
            line = _PRECISION.sub(_HIGHEST, line)
        elif ", metadata=" in line:
            line = line.replace(", metadata=", f", {_HIGHEST}, metadata=", 1)
        else:
            line = f"{line}, {_HIGHEST}"
        out += [text[at:start], line]
        at = end
    out.append(text[at:])
    return "".join(out)
