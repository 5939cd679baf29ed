"""Did the program's own check of its values fail? Its message, for the failure record.

XLA says nothing when it computes a wrong value: the program finds out itself, with an
``assert`` (np.testing's too), a NaN check, or a printed line, and often exits non-zero
only later, after more work and more log lines. ``failure.classify`` asks here whether a
run that showed no XLA failure ended so, and takes the program's message as the headline.
"""

from __future__ import annotations

import re

# How programs say a value is wrong, strongest first: a line saying "wrong" beats a count of
# mismatches printed beside it, which beats a mere NaN in a log line.
_WRONG_WORDS = (
    re.compile(r"\b(?:wrong|incorrect)\b", re.I),
    re.compile(r"\bmismatch(?:es|ed)?\b|\bnot (?:all)?close\b|\bnot equal\b|\bdiffers?\b", re.I),
    re.compile(r"\bnan\b|\binf\b", re.I),
)
# A line that counts nothing wrong: "0 mismatches", "mismatches: 0", "no differences".
_NOTHING_WRONG = re.compile(
    r"\b(?:0|zero|no)\s+(?:\w+\s+)?(?:mismatch|differ|error|wrong|nan)\w*|"
    r"\b(?:mismatch|difference|error|nan)\w*(?:\s+\w+)?\s*[:=]\s*0+(?:\.0+)?(?![\d.])",
    re.I,
)
# A check that says it failed ("SHARDING CHECK FAILED: ... differs"): stronger than a count.
_FAILED = re.compile(r"\bFAIL(?:ED|URE|S)?\b|\bcheck failed\b", re.I)
# "shape mismatch", "dtype mismatch": a program's mistake, not a wrong value.
_NOT_A_VALUE = re.compile(r"\b(?:shape|dtype|type|rank|ndim|length|size)s?\b", re.I)
# Exceptions that are a check of values by their nature: asserts (np.testing's too) and
# FloatingPointError (jax_debug_nans, np.seterr(all="raise")).
_VALUE_EXCEPTIONS = re.compile(r"(?:^|\.)(?:AssertionError|FloatingPointError)$")
# Lines no program prints about its values: glog lines and JAX's compile log.
_LOG_LINE = re.compile(r"^[IWEF]\d{4} |^(?:Compiling|Finished) ")
# A date and time before a program's own log line ("2026-12-07 01:50:13,893 ERROR ctr: ...",
# "[2026-12-07T01:50:13.893Z] ..."): different on every run, it says nothing of the failure.
_TIMESTAMP = re.compile(
    r"^\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[\s|:-]*"
)


# The first line of np.testing's message ("Not equal to tolerance rtol=1e-06, atol=0", "Arrays
# are not equal", "Arrays are not almost equal to 7 decimals").
_NP_TESTING = re.compile(r"^(?:Not equal to tolerance|Arrays are not (?:almost )?equal)\b")


def without_timestamp(line: str) -> str:
    """``line`` without the date and time a program's logging put before it."""
    return _TIMESTAMP.sub("", line, count=1) or line


# A bare ``assert`` ends its traceback with "AssertionError" alone; the line above is the code.
_BARE_ASSERT_RE = re.compile(r"^ +(?P<code>\S[^\n]*)\n(?:[ ^~]+\n)?AssertionError$", re.M)


def message(
    output: str, status: tuple[str, str | None, str] | None, *, from_xla: bool
) -> str | None:
    """The program's own message when its check of the values failed, else None.

    The last traceback tells first: an ``assert`` (bare or np.testing's), a
    FloatingPointError, or a Python error whose message says the value is wrong or NaN. With
    no traceback (the program printed what it found and exited non-zero later), the line
    that says so: never the last line, which is whatever the program printed at the end.
    """
    last_traceback = output.rfind("Traceback (most recent call last)")
    if last_traceback >= 0:
        bare = _BARE_ASSERT_RE.search(output, last_traceback)
        if bare is not None:
            return f"AssertionError: {bare.group('code').strip()}"[:300]
    elif (in_pytest := _pytest_value_error(output)) is not None:
        return in_pytest
    if status is not None:
        exc, _, msg = status
        if from_xla and not _is_value_error(exc):
            return None
        if _is_value_error(exc):
            return f"{exc}: {msg or _message_after(output, exc)}".rstrip(": ")[:300]
        return f"{exc}: {msg}"[:300] if _wrong_words(msg) else None
    return _wrong_line(output)


# np.testing's report of a failed comparison: the largest relative difference ("among
# violations" since numpy 2), and the dtype of the values checked (a float64 array's repr
# names none). numpy 1 calls the two arrays x and y.
_MAX_RELATIVE = re.compile(r"^Max relative difference(?: among violations)?: (\S+)$", re.M)
_ACTUAL = re.compile(r"^ (?:ACTUAL|x): array\((?P<repr>.*?)^ (?:DESIRED|y): ", re.M | re.S)
_EPSILON = {"float64": 2.22e-16, "float32": 1.19e-7, "float16": 9.77e-4, "bfloat16": 7.81e-3}
_ROUNDING = 16  # differences up to this many epsilons are rounding, not a wrong value


def check_note(output: str) -> str | None:
    """When np.testing's check of floating-point values failed by no more than rounding in
    their own precision, one clause that says so ("... is 2.6 times float32's epsilon ...");
    otherwise None. A check tighter than its dtype can hold fails on a correct result."""
    at = output.rfind("Traceback (most recent call last)")
    tail = output[at:] if at >= 0 else _pytest_text(output) or output
    found, actual = _MAX_RELATIVE.search(tail), _ACTUAL.search(tail)
    if found is None or actual is None:
        return None
    try:
        relative = float(found.group(1))
    except ValueError:
        return None
    named = re.search(r"dtype=(\w+)\)\s*$", actual.group("repr"))
    dtype = named.group(1) if named else "float64"
    epsilon = _EPSILON.get(dtype)
    if epsilon is None or not relative <= _ROUNDING * epsilon:
        return None
    return (
        f"the check's largest relative difference, {relative:.2g}, is "
        f"{relative / epsilon:.2g} times {dtype}'s epsilon ({epsilon:.3g}): rounding in "
        f"{dtype} alone reaches that, so a tolerance this tight can fail on a correct result"
    )


def exception_of(headline: str) -> str | None:
    """The exception type a ``message`` starts with ("AssertionError"), if it does."""
    name = headline.split(":", 1)[0]
    return name if re.fullmatch(r"[\w.]*(?:Error|Exception)", name) else None


def _is_value_error(exc: str) -> bool:
    return _VALUE_EXCEPTIONS.search(exc) is not None


def _wrong_words(line: str) -> int:
    """How strongly ``line`` says a value is wrong: 4 (a failed check that says how) to 0
    (not at all, or it counts nothing wrong: "vs numpy: 0 mismatches")."""
    if _NOT_A_VALUE.search(line) or _NOTHING_WRONG.search(line):
        return 0
    for strength, words in zip((3, 2, 1), _WRONG_WORDS, strict=True):
        if words.search(line):
            return strength + (1 if _FAILED.search(line) else 0)
    return 0


def _wrong_line(output: str) -> str | None:
    """The line that says most strongly that a value is wrong; the last of equals. Where the
    program printed np.testing's message without its exception line (it caught it), that
    message: what was compared and how many elements differ."""
    lines = output.splitlines()
    block = [i for i, line in enumerate(lines) if _NP_TESTING.match(line.strip())]
    if block:
        return _joined(lines[block[-1] :])[:300]
    best, strength = None, 0
    for line in lines:
        line = line.strip()
        # A heading of what follows ("Mismatch at indices:") says less than what it heads.
        if not line or _LOG_LINE.search(line) or line.endswith(":"):
            continue
        found = _wrong_words(line)
        if found and found >= strength:
            best, strength = without_timestamp(line)[:300], found
    return best


def _message_after(output: str, exc: str) -> str:
    """The message an exception printed below its own line, as np.testing's asserts do:
    what was compared and how many elements differ, joined on one line."""
    at = output.rfind(f"\n{exc}:")
    return _joined(output[at + 1 :].splitlines()[1:])


def _joined(lines: list[str]) -> str:
    """np.testing's message lines, up to its count of mismatched elements, on one line."""
    taken: list[str] = []
    for line in lines:
        if line.strip():
            taken.append(line.strip())
        if len(taken) == 3 or line.strip().startswith("Mismatched elements"):
            break
    return "; ".join(taken)


# pytest shows a failed test's exception as lines marked "E", not as a traceback:
# "E       AssertionError: ", then np.testing's message, each line marked too.
# The mark is "E" and seven spaces; what follows keeps its own indent (" ACTUAL: array(").
_PYTEST_LINE = re.compile(r"^E(?: {1,7}(?P<text>.*))?$", re.M)
_EXCEPTION_LINE = re.compile(r"(?P<exc>[\w.]*(?:Error|Exception))(?::[ \t]*(?P<msg>.*))?")


def _pytest_text(output: str) -> str:
    """The lines pytest marked "E" (its report of the exception), unmarked."""
    return "\n".join(m.group("text") or "" for m in _PYTEST_LINE.finditer(output))


def _pytest_value_error(output: str) -> str | None:
    """The message of the value check pytest reported failed, as ``message`` gives it."""
    lines = _pytest_text(output).splitlines()
    for at in range(len(lines) - 1, -1, -1):
        found = _EXCEPTION_LINE.fullmatch(lines[at].strip())
        if found is None:
            continue
        exc, msg = found.group("exc"), (found.group("msg") or "").strip()
        if not _is_value_error(exc) and not _wrong_words(msg):
            return None
        return f"{exc}: {msg or _joined(lines[at + 1 :])}".rstrip(": ")[:300]
    return None
