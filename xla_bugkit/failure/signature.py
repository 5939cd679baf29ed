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
# A source file as XLA names it in a CHECK or a RET_CHECK, with its line ("N" in a signature
# written before the path was taken off first, where a long line number had become "N").
_SOURCE = r"[\w.+~-]+\.(?:cc|h|hpp|cpp|c|inc|py)"
_LINE = r"(?:\d+|N)\b"
# Source paths differ by build: "external/xla/xla/...", "/proc/self/cwd/external/xla/...",
# "bazel-out/k8-opt/bin/...", a Bazel module's "external/xla+/xla/...". The file name stays.
_SOURCE_PATH = re.compile(rf"(?:/?[\w.+~-]+/)+(?={_SOURCE}:{_LINE})")
# When and by which thread a log line was written, as its prefix says: glog's "F1206
# 10:11:12.345678 67890 ", absl's "F0000 00:00:1733490000.123456   12345 ", TensorFlow's
# "2024-07-17 11:40:54.103908: E ".
_LOG_PREFIX = re.compile(
    r"\b[IWEF]\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+\s+"
    r"|\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?::? [IWEF](?= ))?"
)
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
    line = _LOG_PREFIX.sub("", line)
    line = _SOURCE_PATH.sub("", line)  # before the numbers: a line number stays one
    line = _HEX.sub("0x?", line)
    line = _TMP_PATH.sub("<tmp>", line)
    line = _INSTR_ID.sub(r"\1.N", line)
    line = _LONG_NUMBER.sub("N", line)
    return str(_SPACES.sub(" ", line).strip()[:300])


# After ``normalise``: an HLO name ("Reduce.N", "region_N.N", "%fusion.N") and the
# spellings of one value ("1" in one build is "true" in another).
_HLO_NAME = re.compile(r"%?\b[A-Za-z_][\w-]*\.N\b")
_LITERAL = re.compile(r"\b(?:true|false|\d+)\b")
# A CHECK's site: its file stays, its line moves from build to build.
_SITE = re.compile(rf"\b({_SOURCE}):{_LINE}")


def comparable(signature: str) -> str:
    """A signature less what two XLA builds print differently for the same bug: the site's
    file and the condition stay; the site's line and path, status codes, computation names
    and literal spellings go (torch_xla's "Map key not found: Reduce.2, 1" is jaxlib's
    "... region_1.1, true"; "buffer_assignment_util.cc:46]" in one release is ":48]" in the
    next)."""
    # A bundle written before the wrappers (or the path) were taken off still carries them.
    inner = _SOURCE_PATH.sub("", signature.replace(DISPATCH, ""))
    inner = _SITE.sub(r"\1:<line>", inner)
    inner = _NAME_NUMBER.sub("_N", _LEADING_CODE.sub("", inner))
    return _LITERAL.sub("<v>", _HLO_NAME.sub("<name>", inner))
