"""A failure's signature: its key line less what differs between two runs of the same bug.

Two runs of one bug print different addresses, temp paths, instruction ids and checkouts;
two XLA versions (jaxlib's and torch_xla's, say) differ in status codes and in the numbers
they put in computation names. ``normalise`` makes the signature a run records;
``comparable`` what two signatures are compared by.
"""

from __future__ import annotations

import re

from xla_bugkit.failure.xla_status import DISPATCH
from xla_bugkit.failure.xla_status import STATUS as _STATUS

# What a CHECK prints after its condition: CHECK_EQ's operands "(0x.. vs. (null))" and the
# offending instruction "%constant.48 = ...". The condition itself may hold "(", "<", "%".
_CHECK_TAIL = re.compile(r"(?P<keep>.*?Check failed: .*?)(?: \(\S+ vs\. |\s+%[\w.-]+ = |$)")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_TMP_PATH = re.compile(r"(?:/tmp|/var/folders|/private/var)/[^\s'\":,)]+")
_INSTR_ID = re.compile(r"(%?[A-Za-z_][\w-]*)\.\d+\b")
_LONG_NUMBER = re.compile(r"\b\d{5,}\b")
_SPACES = re.compile(r"\s+")
# Source paths differ by checkout ("external/xla/xla/..." vs "xla/..."): the file name stays.
_SOURCE_PATH = re.compile(r"(?:[\w.-]+/)+([\w.-]+\.(?:cc|h|cpp|py):\d+)")
_LEADING_CODE = re.compile(rf"^(?:{_STATUS}): ")
_NAME_NUMBER = re.compile(r"(?<=[A-Za-z])_\d+\b")


def normalise(line: str) -> str:
    """Strip what differs between two runs of the same bug: addresses, temp paths, ids.

    A CHECK's condition is its identity; the operands and the instruction it prints after
    it (" (0x.. vs. ..) %constant.47 = ...") change from run to run and are dropped.
    """
    check = _CHECK_TAIL.match(line)
    if check:
        line = check.group("keep")
    line = _HEX.sub("0x?", line)
    line = _TMP_PATH.sub("<tmp>", line)
    line = _INSTR_ID.sub(r"\1.N", line)
    line = _LONG_NUMBER.sub("N", line)
    line = _SOURCE_PATH.sub(r"\1", line)
    return str(_SPACES.sub(" ", line).strip()[:300])


# After ``normalise``: an HLO name ("Reduce.N", "region_N.N", "%fusion.N") and the
# spellings of one value ("1" in one build is "true" in another).
_HLO_NAME = re.compile(r"%?\b[A-Za-z_][\w-]*\.N\b")
_LITERAL = re.compile(r"\b(?:true|false|\d+)\b")


def comparable(signature: str) -> str:
    """A signature less what two XLA builds print differently for the same bug: the site
    and the condition stay; status codes, computation names and literal spellings go
    (torch_xla's "Map key not found: Reduce.2, 1" is jaxlib's "... region_1.1, true")."""
    # A bundle written before the wrappers were taken off still carries them.
    inner = _NAME_NUMBER.sub("_N", _LEADING_CODE.sub("", signature.replace(DISPATCH, "")))
    return _LITERAL.sub("<v>", _HLO_NAME.sub("<name>", inner))
