"""A triage in words: the one-line headline for people, the issue's title and the first
sentence of its description (``triage`` decides; this says it)."""

from __future__ import annotations

import re

from xla_bugkit.bundle import issue
from xla_bugkit.bundle.triage import Triage
from xla_bugkit.failure import mosaic
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.verdict import INTERPRET_MODE, Verdict

_NOT_XLA = " (no sign of an XLA bug)"  # the end of the title of a failure not XLA's
# The end of the title of a failure that points at XLA where no replay outside the program
# reproduced it: XLA is named only where one did (``Triage.proven``).
UNPROVEN = " (not shown to be XLA's yet)"


def headline(t: Triage, failure: Failure) -> str:
    """One line for people: what happened (a wrong result the replay proved is the news,
    whatever the program's own check printed)."""
    if t.what == "wrong result" and t.verdict is not None:
        where = f" in {t.where}" if t.where else ""
        return f"wrong result{where}: {t.verdict.evidence}"
    return failure.describe


def differences(verdict: Verdict) -> str:
    """``"1 of 32769 elements differ from the op-by-op reference"`` for a wrong result."""
    numbers = verdict.numbers
    notes = numbers.get("notes")
    if isinstance(notes, list) and notes:
        return str(notes[0])
    reference = numbers.get("reference", "a")
    counted = f"{numbers.get('mismatches', '?')} of {numbers.get('elements', '?')} elements"
    if reference == INTERPRET_MODE:
        return f"{counted} differ from the kernel's values under Pallas's interpret mode"
    return f"{counted} differ from the {reference} reference"


def title(t: Triage, failure: Failure, platform: str | None) -> str:
    """The issue's title: what happened, where, and the key line (not yet redacted)."""
    xla = " ".join(p for p in ("XLA", (platform or "").upper()) if p)
    where = f" in {t.where}" if t.where else ""
    if not t.xla:
        return issue.cut_title(f"{_ended(failure)}{_NOT_XLA}")
    if t.unproven:
        return _unproven_title(t, failure, platform)
    if t.what == "wrong result" and t.verdict is not None:
        # The reference each value was checked against is the body's to say.
        counted = differences(t.verdict).split(" from the ", 1)[0]
        return issue.cut_title(f"{xla} wrong result{where}: {counted}")
    if t.what == "hang" or KINDS[failure.kind].stopped:
        if failure.phase is Phase.COMPILE and t.where:
            return issue.cut_title(f"{xla} hang while compiling {t.where}")
        return issue.cut_title(f"{xla} hang{where}")
    died = KINDS[failure.kind].dies
    if died and failure.site is None and failure.headline.startswith("killed by "):
        # No message to quote: what died, on which signal, doing what.
        doing = "compiling" if failure.kind is Kind.COMPILE_CRASH else "running"
        sig = f" ({failure.signal})" if failure.signal else ""
        return issue.cut_title(f"{xla} crash{sig} while {doing} {t.where or 'a module'}")
    kernel = mosaic.find(failure.headline) if failure.kind is Kind.COMPILE_ERROR else None
    if kernel is not None and kernel.code:
        return issue.cut_title(
            f"Pallas TPU kernel refused by Mosaic: {kernel.code} {kernel.name}: {kernel.message}"
        )
    message = _with_numbers(failure.signature, failure.headline) or failure.headline
    return issue.title_for(failure.kind.value, message, platform=platform)


def _unproven_title(t: Triage, failure: Failure, platform: str | None) -> str:
    """A failure that points at XLA, not yet shown by a replay: what happened, in the run's
    own words, on which platform, with no "XLA" ahead of it."""
    what = "hang" if t.what == "hang" or KINDS[failure.kind].stopped else failure.kind.value
    message = _with_numbers(failure.signature, failure.headline) or failure.headline
    if message.startswith("killed by ") or what == "hang":
        message = ""  # said by the kind alone
    # Cut as an XLA title of that room would be (at a word), then "XLA " dropped.
    room = issue.TITLE_MAX - len(UNPROVEN) + len("XLA ")
    body = issue.title_for(what, message, platform=platform, limit=room).removeprefix("XLA ")
    return body + UNPROVEN


def _with_numbers(signature: str, headline: str) -> str:
    """The signature (its paths and addresses trimmed for comparing failures) with the
    numbers it stands ``N`` for put back from the headline: "allocating 1890253528 bytes"
    tells a reader what "allocating N bytes" cannot. "" when the two do not line up."""
    parts = re.split(r"\bN\b", signature)
    if len(parts) == 1:
        return signature
    found = re.search(r"(\d[\d,.]*)".join(map(re.escape, parts)), headline)
    code = re.match(r"[A-Z_]+: ", parts[0])
    if found is None and code is not None and headline.startswith(code.group()):
        # The status code heads the signature, which drops the wrappers between it and the
        # message ("INTERNAL: Error dispatching computation: ... Out of memory ..."). The
        # code is the outer wrapper's, not the message's (RESOURCE_EXHAUSTED, say): the
        # message goes alone, as the run printed it.
        signature = signature[code.end() :]
        parts = [parts[0][code.end() :], *parts[1:]]
        found = re.search(r"(\d[\d,.]*)".join(map(re.escape, parts)), headline)
    if found is None:
        return ""  # they do not line up: the headline, as the run printed it
    numbers = iter(found.groups())
    return re.sub(r"\bN\b", lambda _: next(numbers), signature)


def _ended(failure: Failure) -> str:
    if failure.peer is not None:
        return f"Ended by its job, another process having failed: {failure.headline}"
    if failure.callback and failure.exception is None:
        # Named by the function alone: its line is the body's to say.
        name = failure.callback.split(" (", 1)[0]
        inside = f" in jit({failure.executing})" if failure.executing else ""
        if failure.kind is Kind.CRASH:
            died = f"The program's own callback {name} dies on {failure.signal}"
            # The call it ran in goes where the title has room: the callback is the news.
            fits = len(f"{died}{inside}{_NOT_XLA}") <= issue.TITLE_MAX
            return f"{died}{inside}" if fits else died
        return f"The program's own callback {name} hangs{inside}"
    if failure.kind is Kind.HANG:
        return "The program hangs"
    if failure.kind is Kind.INTERRUPTED:
        return "The program was interrupted"
    if not failure.kind.is_failure:
        return "The program runs without failing"
    return failure.headline or f"exit status {failure.exit_status}"


def sentence(t: Triage, failure: Failure) -> str:
    """The description's first sentence, in Markdown; all program text is escaped."""
    if not t.xla:
        return f"**This does not look like an XLA bug:** {issue.plain(t.reason)}."
    if t.unproven:
        return (
            f"**Not shown to be an XLA bug yet:** {issue.plain(t.reason)}. No replay outside "
            "the program has shown the failure to be XLA's, so nothing yet tells XLA's part "
            f"from the program's. {UNPROVEN_TRY}."
        )
    at = f" {issue.code_span(t.where)}" if t.where else ""
    sig = f" ({failure.signal})" if failure.signal else ""
    if t.what == "wrong result" and t.verdict is not None:
        found = issue.plain(differences(t.verdict))
        if t.verdict.numbers.get("reference") == INTERPRET_MODE:
            return (
                f"The TPU's compiled Pallas kernel{at and ' in' + at} computes a wrong result, "
                f"with no error: {found}."
            )
        return f"XLA computes a wrong result{at and ' in' + at}, with no error: {found}."
    if t.what == "hang" or KINDS[failure.kind].stopped:
        if failure.phase is Phase.COMPILE:
            module = at or " a module"
            return f"XLA never finishes compiling{module}: the run {_how_ended(failure)}."
        return f"The program hangs{at and ' in' + at}: it {_how_ended(failure)}."
    module, code = at or " a module", at or " compiled code"
    return KINDS[failure.kind].sentence.format(sig=sig, module=module, code=code)


def _how_ended(failure: Failure) -> str:
    """How a hang's run ended: stopped by collect or the user, or ended by the program itself
    (its own watchdog's exit) while XLA still ran."""
    if failure.kind is Kind.INTERRUPTED or failure.stopped_by == "user":
        return "was stopped by the user"
    if failure.stopped_by == "signal":
        return "was stopped by a signal from outside collect"
    if failure.stopped_by is None and failure.exit_status is not None:
        # Said still running only where its own record showed it (``weigh``); otherwise the
        # replay that hung is what shows the hang.
        still = " while XLA still ran" if failure.kind is Kind.HANG else ""
        return f"ended itself (exit status {failure.exit_status}){still}"
    return "was stopped after the timeout"


# What a reporter can do about a failure that points at XLA that no replay has shown.
UNPROVEN_TRY = (
    "To prove it: collect again without --no-replay, with --snapshots every (the failing "
    "call's own inputs) or a longer --replay-timeout, or shrink the program until a replay "
    "of its module shows the failure"
)
