"""ISSUE.md: a GitHub issue body in the shape of its tracker's bug form.

jax-ml/jax's form has two sections, "Description" and "System info (python version, jaxlib
version, accelerator, etc.)"; the body keeps those headings verbatim so it can be pasted into
the form (or sent with ``gh issue create --body-file``). TensorFlow's and PyTorch/XLA's forms
have templates of their own (``trackers``). Everything that comes from the failing program
lands in code spans or fenced blocks sized so that its content cannot close them.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from xla_bugkit._version import __version__
from xla_bugkit.bundle import installed

TEMPLATE = "issue.md"
LOG_TAIL_LINES = 60
TITLE_MAX = 99  # GitHub allows 256; long titles are cut off in issue lists anyway
_LINE_MAX = 400  # one minified HLO line can be megabytes long

_GLOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ ")
_SITE_FIRST = re.compile(r"^(?P<site>[\w./-]+\.\w+:\d+)\]?\s+(?P<msg>.+)$")
_SITE_LAST = re.compile(r"^(?P<msg>.+?)\s+\((?P<site>[\w./-]+\.\w+:\d+)\)$")
# XLA's RET_CHECK status: "INTERNAL: RET_CHECK failure (dot_op_emitter.cc:1124) cond ...".
_RET_CHECK = re.compile(
    r"^(?:[A-Z_]+: )?RET_CHECK failure \((?P<site>[\w./-]+\.\w+:\d+)\)\s*(?P<msg>.*)$"
)
# Log lines that carry nothing: blank ones, and XLA's stack-trace banners and frames whose
# symbol is unknown ("    @     0x7f22c8aa71f5  (unknown)").
_NOISE = re.compile(r"^\s*(?:\*\*\*[^*]*\*\*\*|@\s+0x[0-9a-fA-F]+(?:\s+\(unknown\))?)?\s*$")
_FATAL = re.compile(r"^F\d{4} \d|RET_CHECK failure|Check failed:")


@dataclass(frozen=True)
class IssueContext:
    """What ISSUE.md says. All text must already be redacted (see ``redact.Redactor``).

    ``description`` is Markdown written by the tool; every other field is shown as text.
    """

    title: str
    failure_kind: str  # "compile-time crash"
    signature: str  # "buffer_assignment_util.cc:46 Check failed: const_instr == nullptr"
    description: str
    command: str
    exit_status: str  # "killed by SIGABRT", "exit status 1"
    verify_command: str  # "xla-bugkit verify bundle.zip"
    system_info: str  # EnvReport.to_text()
    log_tail: str
    jax_version: str
    jaxlib_version: str
    bundle_name: str
    selected_modules: Sequence[tuple[str, str]] = ()  # (module, why it is in the bundle)
    replay_verdicts: Sequence[tuple[str, str, str]] = ()  # (module, verdict, evidence)
    replay_note: str = ""  # shown instead of an empty verdicts table ("not run (--no-replay)")
    repro_command: str = ""  # "python repro.py": the bundle's standalone script
    repro_missing: str = ""  # why the bundle has no standalone script ("": it has one)
    hlo_command: str = ""  # "run_hlo_module --platform=cpu ... FILE"
    module_label: str = ""  # the module shown inline, when it is small
    module_text: str = ""  # its before-optimizations HLO text
    jaxpr: tuple[str, str] = ("", "")  # the function's jaxpr in the bundle: name, short text
    wrong_values: Sequence[tuple[str, str, str]] = ()  # (index, reference value, XLA's value)
    reference: str = ""  # what the reference values come from ("op-by-op")
    inputs: str = ""  # the inputs' shapes and where they come from
    # The XLA the failure shows under when jaxlib's does not ("torch_xla 2.9.0's own XLA"):
    # the bundle's repro.py and run_hlo_module then show nothing.
    native_only: str = ""
    form: str = TEMPLATE  # the tracker's form (``trackers.form``)
    install: str = "pip install xla-bugkit"  # how to install xla-bugkit (``install_command``)
    fields: Mapping[str, str] = field(default_factory=dict)  # what that form asks for


def render_issue(ctx: IssueContext) -> str:
    """The issue body, rendered from ``templates/issue.md``."""
    tail, tail_lines = log_tail(ctx.log_tail)
    optional = {
        "wrong_values": _wrong_values(ctx),
        "module_block": _module_block(ctx),
        "jaxpr_block": _jaxpr_block(ctx),
    }
    values = {
        **optional,
        "title_comment": _for_comment(ctx.title),
        "bundle_comment": _for_comment(ctx.bundle_name),
        "description": ctx.description.strip(),
        "failure_kind": plain(ctx.failure_kind),
        "exit_status": plain(ctx.exit_status),
        # A run that did not fail (collect --always) has no key line to show.
        "signature": code_span(ctx.signature) if ctx.signature.strip() else "none (no failure)",
        "command": fenced(ctx.command, "shell"),
        "bundle": code_span(ctx.bundle_name),
        "jax_version": plain(ctx.jax_version),
        "jaxlib_version": plain(ctx.jaxlib_version),
        "reproduce": _reproduce(ctx),
        "modules_table": table(
            ("Module", "Why it is included"),
            [(code_span(m), plain(why)) for m, why in ctx.selected_modules],
        ),
        "verdicts_table": table(
            ("Module", "Verdict", "Evidence"),
            [(code_span(m), f"**{plain(v)}**", plain(e)) for m, v, e in ctx.replay_verdicts],
            empty=plain(ctx.replay_note) if ctx.replay_note else "_None._",
        ),
        "log_line_count": str(tail_lines),
        "log_tail": fenced(tail, "text"),
        "system_info": fenced(ctx.system_info, "text"),
        "bugkit_version": __version__,
        **{name: plain(value) for name, value in ctx.fields.items()},
    }
    template = load_template(ctx.form).template
    for name, value in optional.items():
        if not value:  # an absent section leaves no empty paragraph behind
            template = template.replace(f"${name}\n\n", "")
    return string.Template(template).substitute(values)


def _reproduce(ctx: IssueContext) -> str:
    """The ways to reproduce, quickest first: the bundle's script, XLA's own tool, verify."""
    if ctx.native_only:
        return _verify_block(
            ctx,
            f"The failure shows under {plain(ctx.native_only)} only: jaxlib's XLA, which the "
            "bundle's standalone script uses, runs the module to completion. Replay it where "
            "that framework is installed",
        )
    parts = []
    if ctx.repro_command:
        parts.append(
            "Unpack it and run its standalone script (it needs only jax and numpy):\n\n"
            + fenced(ctx.repro_command, "shell")
        )
    elif ctx.repro_missing:
        parts.append(f"The bundle has no standalone script: {plain(ctx.repro_missing)}.")
    if ctx.hlo_command:
        parts.append(
            ("Or with" if ctx.repro_command else "With")
            + " XLA's `run_hlo_module` (built from openxla/xla), on the module before "
            "XLA's optimizations and with the XLA flags in force"
            + (
                " and the recorded inputs (the first line writes them as it reads them)"
                if "--input_literals_file=" in ctx.hlo_command
                else ""
            )
            + ":\n\n"
            + fenced(ctx.hlo_command, "shell")
        )
    offered = bool(ctx.repro_command or ctx.hlo_command)
    lead = (
        "Or, thoroughly, replay every module of the bundle against reference results"
        if offered
        else "Replay every module of the bundle against reference results"
        if parts
        else ""
    )
    parts.append(_verify_block(ctx, lead))
    return "\n\n".join(parts)


def _verify_block(ctx: IssueContext, lead: str) -> str:
    """``lead``, then ``verify`` after the install that gets this xla-bugkit: one installed
    from a clone is got from a clone, not by a version a package index may not have."""
    if ctx.install != installed.FROM_CLONE:
        said = f"{lead}:\n\n" if lead else ""
        return said + fenced(f"{ctx.install} && {ctx.verify_command}", "shell")
    clone = (
        f"with xla-bugkit {__version__} installed from a clone of its repository, as its "
        "README says (`python -m pip install .` in the clone)"
    )
    said = f"{lead}, {clone}" if lead else clone[0].upper() + clone[1:]
    return f"{said}:\n\n" + fenced(ctx.verify_command, "shell")


def _wrong_values(ctx: IssueContext) -> str:
    if not ctx.wrong_values:
        return ""
    rows = [(code_span(i), code_span(ref), code_span(got)) for i, ref, got in ctx.wrong_values]
    reference = f"the {plain(ctx.reference)} reference" if ctx.reference else "the reference"
    lines = [
        f"**First differing values** ({reference} against XLA's result):",
        "",
        table(("Output index", "Reference", "XLA"), rows),
    ]
    if ctx.inputs:
        lines += ["", f"**Inputs:** {plain(ctx.inputs)}"]
    return "\n".join(lines)


# The stack-frame tables HLO text carries after its header (source files, functions, and
# the frames ``stack_frame_id`` points at): the bundle's file keeps them, a reader skips them.
_FRAME_TABLES = re.compile(
    r"^(?:FileNames|FunctionNames|FileLocations|StackFrames)\n(?:[^\n]+\n)*\n*", re.M
)


def _module_block(ctx: IssueContext) -> str:
    if not ctx.module_text:
        return ""
    text = _FRAME_TABLES.sub("", ctx.module_text)
    lines = len(text.rstrip("\n").splitlines())
    left_out = " without its stack-frame tables" if text != ctx.module_text else ""
    return (
        "<details>\n"
        f"<summary>The module before XLA's optimizations ({plain(ctx.module_label)}, "
        f"{lines} lines{left_out})</summary>\n\n"
        f"{fenced(text, 'text')}\n\n"
        "</details>"
    )


def _jaxpr_block(ctx: IssueContext) -> str:
    """The function as JAX traced it: shown when short, named when not."""
    name, body = ctx.jaxpr
    if not name:
        return ""
    if not body:
        return f"The function as JAX traced it (its jaxpr) is in the bundle: {code_span(name)}."
    lines = len(body.rstrip("\n").splitlines())
    return (
        "<details>\n"
        f"<summary>The function as JAX traced it (jaxpr, {lines} lines, "
        f"{code_span(name.rsplit('/', 1)[-1])})</summary>\n\n"
        f"{fenced(body, 'text')}\n\n"
        "</details>"
    )


def title_for(
    failure_kind: str, signature: str, *, platform: str | None = None, limit: int = TITLE_MAX
) -> str:
    """A concise issue title (at most ``limit`` characters).

    ``title_for("compile-time crash", "buffer_assignment_util.cc:46 Check failed: x",
    platform="cpu")`` gives ``"XLA CPU compile-time crash: Check failed: x
    (buffer_assignment_util.cc:46)"``.
    """
    kind = " ".join(failure_kind.split())
    if not kind.upper().startswith(("XLA", "JAX")):
        kind = " ".join(p for p in ("XLA", (platform or "").upper(), kind) if p)
    msg, site = _split_site(" ".join(_GLOG_PREFIX.sub("", signature.strip()).split()))
    suffix = f" ({site})" if site else ""
    room = limit - len(kind) - len(": ") - len(suffix)
    if not msg:
        return kind[:limit]
    if len(msg) > room:
        cut = msg[: max(room - 1, 0)]
        # At a word's end where one is near: "rfind("x…" reads as a different call.
        space = cut.rfind(" ")
        msg = (cut[:space] if space > room * 2 // 3 else cut).rstrip() + "…"
    return f"{kind}: {msg}{suffix}"[:limit]


def fenced(text: str, lang: str = "") -> str:
    """A fenced code block that ``text`` cannot close, whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"


def code_span(text: str) -> str:
    """An inline code span for one line of ``text``; safe inside a table cell."""
    one_line = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", one_line)), default=0)
    ticks = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space, which GitHub strips again.
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    # GFM splits table cells at "|" even inside code spans unless it is escaped.
    return f"{ticks}{pad}{one_line.replace('|', chr(92) + '|')}{pad}{ticks}"


def plain(text: str) -> str:
    """One line of ``text`` safe to show as Markdown text: no HTML, no table breaks, and no
    @-mentions that would notify strangers."""
    one_line = " ".join(text.split())
    for raw, safe in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        one_line = one_line.replace(raw, safe)
    return one_line.replace("@", "@<!-- -->")


def _for_comment(text: str) -> str:
    # "--" could end the HTML comment the text sits in ("-->", "--!>").
    one_line = " ".join(text.split())
    while "--" in one_line:
        one_line = one_line.replace("--", "- -")
    return one_line


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, empty: str = "_None._") -> str:
    if not rows:
        return empty
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def log_tail(text: str, n: int = LOG_TAIL_LINES) -> tuple[str, int]:
    """The last ``n`` lines worth reading: no blank lines, no stack-trace banners or frames
    without a symbol, and the first CHECK/RET_CHECK line kept even when a long trace follows."""
    kept = [line for line in text.rstrip("\n").splitlines() if not _NOISE.match(line)]
    lines = kept[-n:]
    fatal = next((i for i, line in enumerate(kept) if _FATAL.search(line)), None)
    if fatal is not None and fatal < len(kept) - n and n > 2:
        skipped = len(kept) - (n - 2) - fatal - 1
        lines = [kept[fatal], f"[... {skipped} lines not shown ...]", *kept[-(n - 2) :]]
    lines = [line if len(line) <= _LINE_MAX else line[:_LINE_MAX] + " …" for line in lines]
    return "\n".join(lines), len(lines)


def cut_title(title: str) -> str:
    """``title`` on one line, cut to ``TITLE_MAX`` characters with an ellipsis."""
    one_line = " ".join(title.split())
    return one_line if len(one_line) <= TITLE_MAX else one_line[: TITLE_MAX - 1].rstrip() + "…"


def _split_site(sig: str) -> tuple[str, str]:
    """("Check failed: x", "file.cc:46") from either "file.cc:46 msg" or "msg (file.cc:46)"."""
    ret_check = _RET_CHECK.match(sig)
    if ret_check:
        return f"RET_CHECK failed: {ret_check['msg'].strip()}", ret_check["site"].rsplit("/")[-1]
    for pattern in (_SITE_FIRST, _SITE_LAST):
        m = pattern.match(sig)
        if m:
            return m["msg"].strip(), m["site"].rsplit("/", 1)[-1]
    return sig, ""


def load_template(name: str) -> string.Template:
    """A template shipped in ``xla_bugkit.templates``."""
    text = resources.files("xla_bugkit.templates").joinpath(name).read_text("utf-8")
    return string.Template(text)


# The shrunk module is shown inline up to this many lines; beyond, the bundle holds it.
SHRUNK_INLINE_LINES = 60


def shrink_section(findings: Sequence[str], module_text: str, path: str) -> str:
    """ISSUE.md's section on a shrink: its findings, and the shrunk module (``path`` in the
    bundle) inline when it is short."""
    lines = ["#### Shrunk reproducer", ""]
    lines += [f"- {plain(f)}" for f in findings]
    lines.append("")
    shown = module_text.strip("\n").splitlines()
    if not shown:
        return "\n".join(lines)
    if len(shown) <= SHRUNK_INLINE_LINES:
        lines += [f"The shrunk module ({code_span(path)} in the bundle):", ""]
        lines += [fenced("\n".join(line[:_LINE_MAX] for line in shown), "text"), ""]
    else:
        lines += [f"The shrunk module is {code_span(path)} in the bundle.", ""]
    return "\n".join(lines)


def cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def without_section(issue: str, heading: str) -> str:
    """``issue`` without the section under ``heading`` (up to the next heading of its level
    or higher), if it has one."""
    at = issue.find("\n" + heading + "\n")
    if at < 0:
        return issue
    level = heading.split(" ", 1)[0]
    rest = issue[at + 1 + len(heading) :]
    ends = [rest.find("\n" + "#" * n + " ") for n in range(1, len(level) + 1)]
    found = [e for e in ends if e >= 0]
    end = min(found) + 1 if found else len(rest)
    return issue[: at + 1] + rest[end:]


def with_section(issue: str, section: str) -> str:
    """``issue`` with ``section`` put before its System info heading (or at its end)."""
    marker = "\n### System info"
    at = issue.find(marker)
    if at < 0:
        return issue.rstrip("\n") + "\n\n" + section
    return issue[: at + 1] + section + "\n" + issue[at + 1 :]
