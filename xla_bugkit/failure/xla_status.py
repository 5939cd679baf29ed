"""XLA's status codes, and how the frameworks pass XLA's errors on to Python.

jaxlib raises XLA's status as it is (``JaxRuntimeError: INTERNAL: ...``). TensorFlow logs the
code apart from its exception and names its function after the message. torch_xla wraps
the status in its message (``Bad StatusOr access: INTERNAL: ...``), or, in 2.9, raises
XLA's message alone, as a ``RuntimeError`` or ``ValueError`` with no code: then only its
graph log says it came from XLA (``ptxla_log``).
"""

from __future__ import annotations

import re

from xla_bugkit.failure import ptxla_log, xla_log

# XLA's canonical status codes (absl::StatusCode names), as printed before the message.
STATUS_CODES = (
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
STATUS = "|".join(STATUS_CODES)

# An exception line's parts: its type, XLA's status code (None: none printed), the message.
Status = tuple[str, str | None, str]

# TensorFlow logs the XLA status an op failed with ("OP_REQUIRES failed at xla_ops.cc:602 :
# UNIMPLEMENTED: ...") and raises it without the code, naming the function last:
# "...errors_impl.UnimplementedError: RngBitGenerator should be ... [Op:__inference_f_23]".
_TF_XLA_OP_RE = re.compile(rf"OP_REQUIRES failed at xla_\w+\.cc:\d+ : (?P<code>{STATUS}): ")
_TF_FUNCTION_RE = re.compile(r"\s*\[Op:(?P<name>__inference_[\w.]+)[^\]]*\]\s*$")
# XLA's status inside a framework's message: "RuntimeError: Bad StatusOr access: INTERNAL: ...".
_INNER_STATUS_RE = re.compile(rf"(?:^|: )(?P<code>{STATUS}): ")


def framework_status(output: str, status: Status | None) -> Status | None:
    """``status`` with the XLA status code a framework printed apart from its exception
    (TensorFlow) or inside its message (torch_xla), and without TensorFlow's ``[Op:...]``,
    which names the function (``tf_function``) and is not part of XLA's message."""
    if status is None:
        return None
    exc, code, msg = status
    msg = _TF_FUNCTION_RE.sub("", msg)
    if code is None:
        tf_op = list(_TF_XLA_OP_RE.finditer(output))
        inner = _INNER_STATUS_RE.search(msg)
        if tf_op:
            code = tf_op[-1].group("code")
        elif inner:
            # "Bad StatusOr access: INTERNAL: x" is XLA's "INTERNAL: x", wrapped.
            code, msg = inner.group("code"), msg[inner.end() :]
    return exc, code, msg


def tf_function(output: str) -> str | None:
    """The TensorFlow function its error names last (``__inference_f_23``)."""
    found = [
        m.group("name")
        for line in output.splitlines()[-400:]
        if (m := _TF_FUNCTION_RE.search(line))
    ]
    return found[-1] if found else None


def graph_that_raised(output: str, status: Status | None) -> ptxla_log.Graph | None:
    """The PyTorch/XLA graph whose compilation or execution raised ``status``'s exception
    when torch_xla gave no status code. A compilation holds the Python thread that asked
    for it, so whatever it raises is XLA's; executions run in the background, so only the
    ``RuntimeError`` torch_xla raises for them counts."""
    if status is None or status[1] is not None:
        return None
    graph = ptxla_log.unfinished(output)
    if graph is None or not (graph.compiling or status[0] == "RuntimeError"):
        return None
    return graph


# "jax.errors.JaxRuntimeError: INTERNAL: message" (older jaxlib: "...XlaRuntimeError: ...").
_STATUS_RE = re.compile(
    rf"^(?P<exc>[\w.]*(?:Error|Exception))(?:: (?P<code>{STATUS}))?: (?P<msg>.*)$", re.M
)
_BARE_STATUS_RE = re.compile(rf"^(?P<code>{STATUS}): (?P<msg>.*)$", re.M)
# XLA's status quoted in a program's own words: "job failed in XLA: INTERNAL: ...". Not in a
# line XLA logs at INFO or WARNING ("I1206 09:03:43.455885 519 preemption_sync_manager.cc:115]
# ... CANCELLED: Preemption notifier is being deleted", as every jax.distributed process that
# shuts down logs), nor in one Python's logging wrote below ERROR (jax's "Unable to initialize
# backend 'tpu': INTERNAL: ..." under the program's own logging.basicConfig): such a line says
# how things went, never how the program failed.
_QUOTED_STATUS_RE = re.compile(
    rf"^(?!{xla_log.INFO_OR_WARNING})"
    rf"(?!{xla_log.PY_LOGGED_BELOW_ERROR}[^\n]*?: (?:{STATUS}): )"
    rf"[^\n]*?: (?P<code>{STATUS}): (?P<msg>.*)$",
    re.M,
)
DISPATCH = "Error dispatching computation: "


def last_status(output: str) -> Status | None:
    """The last Python exception line, as (type, status code or None, message); without
    one, the last line that is XLA's status, alone or quoted in a program's own message (a
    program that caught XLA's error and said so before it exited)."""
    found: tuple[str, str | None, str] | None = None
    for m in _STATUS_RE.finditer(output):
        found = (m.group("exc"), m.group("code"), m.group("msg").strip())
    for pattern in (_BARE_STATUS_RE, _QUOTED_STATUS_RE):
        if found is None:
            for m in pattern.finditer(output):
                found = ("", m.group("code"), m.group("msg").strip())
    return _unwrapped(found, output) if found is not None else None


def _unwrapped(status: Status, output: str) -> Status:
    """A status without the wrappers of an asynchronous failure: an error raised while a
    computation ran reaches Python as ``INTERNAL: Error dispatching computation: <status>``,
    wrapped once more by each computation that was given its broken result. The inner
    status is the failure (a replay raises it bare); its code, which the wrapping may drop,
    is the one in XLA's own log line ("Failed to get literal for result: CODE: message");
    without that line, the status stays as it reached Python."""
    exc, _, msg = status
    if not msg.startswith(DISPATCH):
        return status
    while msg.startswith(DISPATCH):
        msg = msg[len(DISPATCH) :]
    inner = _BARE_STATUS_RE.match(msg) or re.search(
        rf"(?P<code>{STATUS}): (?P<msg>{re.escape(msg)})", output
    )
    if inner is not None:
        return exc, inner.group("code"), inner.group("msg").strip()
    # No line of XLA's gives the inner status its code: quoted as it reached Python (the
    # wrapper's code on the inner message would be a line nobody saw).
    return status
