"""What every key of a manifest must hold: per record (the top level, a file, a module, the
failure, the framework, the processes, the shrink), each key's check and what it means."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_str_dict(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


Check = Callable[[object], bool]
# Every key of a record, with the check its value must pass and what that check means.
Checks = dict[str, tuple[Check, str]]

# Every key of a manifest.
TOP: Checks = {
    "schema": (_is_int, "a number"),
    "tool": (lambda v: isinstance(v, str), "a string"),
    "title": (lambda v: isinstance(v, str), "a string"),
    "created": (lambda v: isinstance(v, str), "a string"),
    "versions": (_is_str_dict, "an object of strings"),
    "command": (_is_str_list, "a list of strings"),
    "xla_flags": (_is_str_list, "a list of strings"),
    "exit_status": (lambda v: v is None or _is_int(v), "a number or null"),
    "failure": (lambda v: isinstance(v, dict), "an object"),
    "guess": (lambda v: isinstance(v, bool), "true or false"),
    "modules": (lambda v: isinstance(v, list), "a list"),
    "other_modules": (_is_int, "a number"),
    "data": (lambda v: isinstance(v, str), "a string"),
    "notes": (_is_str_list, "a list of strings"),
    "files": (lambda v: isinstance(v, list), "a list"),
}
# Keys the top level may have; absent in older bundles.
TOP_OPTIONAL: Checks = {
    "libtpu_init_args": (_is_str_list, "a list of strings"),
}
JOB: Checks = {
    "part": (_is_int, "a number"),
    "parts": (lambda v: v is None or _is_int(v), "a number or null"),
    "from": (lambda v: isinstance(v, str), "a string"),
}
# Keys the job record may have (a part's end and machine; a merged bundle's parts).
JOB_OPTIONAL: Checks = {
    "ended": (lambda v: isinstance(v, str), "a string"),
    "host": (lambda v: isinstance(v, str), "a string"),
    "merged": (lambda v: _is_list_of_objects(v), "a list of objects"),
}
FILE: Checks = {
    "path": (lambda v: isinstance(v, str), "a string"),
    "size": (_is_size, "a size in bytes"),
    "sha256": (lambda v: isinstance(v, str) and bool(_SHA256.fullmatch(v)), "a sha256 in hex"),
}
MODULE: Checks = {
    "label": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "name": (lambda v: isinstance(v, str), "a string"),
    "id": (_is_int, "a number"),
    "platform": (lambda v: isinstance(v, str), "a string"),
    "reasons": (_is_str_list, "a list of strings"),
    "files": (_is_str_dict, "an object of strings"),
    "replay": (lambda v: v is None or isinstance(v, dict), "an object or null"),
}


def _is_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_optional_seconds(value: object) -> bool:
    if value is None:
        return True
    # A hang's replay waits as long as its run went without progress: never NaN or negative.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


# The failure record's fields that are there, each of its type (``Failure.from_json`` then
# checks the kind and phase names and that nothing required is missing).
FAILURE: Checks = {
    "headline": (lambda v: isinstance(v, str), "a string"),
    "signature": (lambda v: isinstance(v, str), "a string"),
    "exit_status": (lambda v: v is None or _is_int(v), "a number or null"),
    **{
        key: (_is_optional_str, "a string or null")
        for key in (
            *("kind", "phase", "signal", "status_code", "site", "exception", "compiling"),
            *("stopped_by", "executing", "function", "evidence", "check_note", "callback"),
            "peer",
        )
    },
    **{
        key: (lambda v: isinstance(v, bool), "true or false")
        for key in ("message_lost", "unread_inputs")
    },
    **{
        key: (_is_optional_seconds, "a number of seconds or null")
        for key in ("ran_seconds", "stalled_seconds")
    },
}


FRAMEWORK: Checks = {
    "name": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "version": (_is_optional_str, "a string or null"),
    "revision": (_is_optional_str, "a string or null"),
    "detected_from": (lambda v: isinstance(v, str), "a string"),
}


def _is_optional_int(value: object) -> bool:
    return value is None or _is_int(value)


PROCESS: Checks = {
    "pid": (_is_int, "a number"),
    **{k: (_is_optional_int, "a number or null") for k in ("rank", "processes", "devices")},
    "platform": (lambda v: isinstance(v, str), "a string"),
    "why": (lambda v: isinstance(v, str), "a string"),
    "memory_cap": (lambda v: v is None or _is_size(v), "a size in bytes or null"),
}
OTHER_PROCESS: Checks = {
    "pid": (_is_int, "a number"),
    "rank": (_is_optional_int, "a number or null"),
    "ended": (lambda v: isinstance(v, str), "a string"),
}


# The shrink record: the keys it must have (others, such as notes, are free-form).
_CULPRIT_HOW = frozenset({"crash-inside", "disabling-hides", "not-a-pass", "needs-disabled"})


def _is_culprit(value: object) -> bool:
    if value is None:
        return True
    return (
        isinstance(value, dict)
        and value.get("how") in _CULPRIT_HOW
        and _is_optional_str(value.get("pass"))
    )


SHRINK: Checks = {
    "module": (lambda v: isinstance(v, str), "a string"),
    "instructions_before": (_is_size, "a count"),
    "instructions_after": (_is_size, "a count"),
    "probes": (_is_size, "a count"),
    "seconds": (lambda v: v is not None and _is_optional_seconds(v), "a number of seconds"),
    "culprit": (_is_culprit, 'null or {"pass": ..., "how": "crash-inside", ...}'),
    "needed_flags": (_is_str_list, "a list of strings"),
    "workarounds": (_is_str_list, "a list of strings"),
}


def _is_list_of_objects(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


# The bisect record: shown as text, so each key need only have its type.
BISECT: Checks = {
    "summary": (lambda v: isinstance(v, str), "a string"),
    "reported": (_is_optional_str, "a string or null"),
    "probes": (_is_list_of_objects, "a list of objects"),
    "boundaries": (_is_list_of_objects, "a list of objects"),
}
