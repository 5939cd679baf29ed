"""The documentation: docs/cli.md is the parser's own help, and every relative link resolves.

docs/cli.md is generated from ``xla_bugkit.cli.grammar.parser()`` by ``render_cli_reference`` below.
When the command line changes, regenerate it from the repository root:

    python -m tests.docs_test

or ``XLA_BUGKIT_UPDATE_DOCS=1 python -m pytest -q tests/docs_test.py``. Nothing here starts a
jax process: the parser is built in this process, and it imports no jax.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from xla_bugkit.cli import grammar, options
from xla_bugkit.errors import COMMAND_MEANINGS, exit_codes_help

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CLI_MD = DOCS / "cli.md"
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
UPDATE = "XLA_BUGKIT_UPDATE_DOCS"
# Run as a module, not as a script: a script's own folder goes first on sys.path, where
# tests/bisect/ would hide the standard library's bisect.
REGENERATE = f"python -m tests.docs_test (or {UPDATE}=1 python -m pytest -q tests/docs_test.py)"
# The width the help is laid out at: fixed, so that the page does not follow the terminal.
WIDTH = 90


class StableHelpFormatter(options.HelpFormatter):
    """argparse's help, laid out the same on every Python the package supports (3.11+).

    The width is fixed (argparse otherwise reads the terminal's, ``COLUMNS``), colour is off
    (3.14 adds it), and the two pieces whose layout changed between versions are written
    here: an option's invocation as 3.11 writes it (``-o OUTPUT, --output OUTPUT``; 3.13
    writes ``-o, --output OUTPUT``), and the usage line, wrapped at whole arguments (3.13
    rewrote that wrapping). Section headings are ``options:`` since 3.10.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH)

    def _set_color(self, color: bool, *args: object, **kwargs: object) -> None:
        super()._set_color(False, *args, **kwargs)  # called on 3.14+ only

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            default = self._get_default_metavar_for_positional(action)
            return str(self._metavar_formatter(action, default)(1)[0])
        if action.nargs == 0:
            return ", ".join(action.option_strings)
        args = self._format_args(action, self._get_default_metavar_for_optional(action))
        return ", ".join(f"{option} {args}" for option in action.option_strings)

    def _format_usage(
        self,
        usage: str | None,
        actions: Iterable[argparse.Action],
        groups: Iterable[argparse._MutuallyExclusiveGroup],
        prefix: str | None,
    ) -> str:
        prefix = "usage: " if prefix is None else prefix
        if usage is not None:
            return f"{prefix}{usage % {'prog': self._prog}}\n\n"
        shown = [a for a in actions if a.help is not argparse.SUPPRESS]
        optionals = [self._usage_part(a) for a in shown if a.option_strings]
        positionals = [self._usage_part(a) for a in shown if not a.option_strings]
        one_line = " ".join([prefix + self._prog, *optionals, *positionals])
        if len(one_line) <= self._width:
            return f"{one_line}\n\n"
        indent = " " * (len(prefix) + len(self._prog) + 1)
        # As argparse does: the options after the program's name, the positionals below them.
        lines = _wrap([prefix + self._prog, *optionals], indent, self._width)
        if positionals:
            lines += _wrap([indent + positionals[0], *positionals[1:]], indent, self._width)
        return "\n".join(lines) + "\n\n"

    def _usage_part(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return self._format_args(action, self._get_default_metavar_for_positional(action))
        part = action.option_strings[0]
        if action.nargs != 0:
            args = self._format_args(action, self._get_default_metavar_for_optional(action))
            part = f"{part} {args}"
        return part if action.required else f"[{part}]"


def _wrap(parts: Sequence[str], indent: str, width: int) -> list[str]:
    """``parts`` joined by spaces into lines of at most ``width``, each after the first
    starting with ``indent``; a part is never split."""
    lines: list[str] = []
    line = ""
    for part in parts:
        if line and len(line) + 1 + len(part) > width:
            lines.append(line)
            line = indent + part.lstrip()
        else:
            line = f"{line} {part}" if line else part
    return [*lines, line] if line else lines


def command_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """``xla-bugkit`` and each of its subcommands, in the parser's order, with their parsers."""
    top = grammar.parser()
    found = [("xla-bugkit", top)]
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"xla-bugkit {name}", sub) for name, sub in action.choices.items()]
    return found


def render_cli_reference() -> str:
    """docs/cli.md: every command's ``--help`` text, as the parser writes it."""
    parsers = command_parsers()
    out = [
        "# CLI reference",
        "",
        "<!-- Generated from the parser (xla_bugkit/cli/grammar.py) by tests/docs_test.py; "
        "do not edit.",
        f"     Regenerate: {REGENERATE}. -->",
        "",
        "What `xla-bugkit --help` and `xla-bugkit COMMAND --help` print. The guides explain the",
        "commands: [reporting](reporting.md), [checking a bundle](maintainers.md),",
        "[shrinking](shrink.md); the exit codes are in [exit codes](exit-codes.md).",
        "",
        *(f"- [`{title}`](#{title.replace(' ', '-')})" for title, _ in parsers),
    ]
    for title, parser in parsers:
        parser.formatter_class = StableHelpFormatter
        help_text = "\n".join(line.rstrip() for line in parser.format_help().splitlines())
        out += ["", f"## {title}", "", "```text", help_text.strip("\n"), "```"]
    return "\n".join(out) + "\n"


def test_the_cli_reference_is_the_parsers_help() -> None:
    expected = render_cli_reference()
    actual = CLI_MD.read_text("utf-8") if CLI_MD.exists() else ""
    if actual == expected:
        return
    if os.environ.get(UPDATE) == "1":
        CLI_MD.write_text(expected, "utf-8")
        return
    diff = difflib.unified_diff(
        actual.splitlines(),
        expected.splitlines(),
        "docs/cli.md",
        "the parser's help",
        lineterm="",
    )
    shown = "\n".join(list(diff)[:60])
    raise AssertionError(
        f"docs/cli.md differs from the parser's help; regenerate it with {REGENERATE}\n{shown}"
    )


def _subcommands() -> list[str]:
    return [title.split(" ", 1)[1] for title, _ in command_parsers()[1:]]


def test_the_cli_reference_has_every_subcommand() -> None:
    text = CLI_MD.read_text("utf-8")
    missing = [name for name in _subcommands() if f"\n## xla-bugkit {name}\n" not in text]
    assert not missing, f"docs/cli.md lacks {missing}; regenerate it with {REGENERATE}"


def test_the_readme_table_lists_every_subcommand() -> None:
    rows = re.findall(r"^\| `xla-bugkit (\w+)[^`]*` \|", README.read_text("utf-8"), re.M)
    assert sorted(set(rows)) == sorted(_subcommands())


def test_the_exit_codes_page_lists_each_commands_codes() -> None:
    page = " ".join((DOCS / "exit-codes.md").read_text("utf-8").split())
    for command in COMMAND_MEANINGS:
        codes = exit_codes_help(command).removeprefix("exit codes: ")
        assert f"`{command}`: {codes}" in page, command


def test_the_parser_is_built_without_jax() -> None:
    """The reference is generated without jax, and ``--help`` answers without importing it."""
    probe = (
        "import sys, xla_bugkit.cli.grammar as c; c.parser(); "
        "sys.exit(' '.join(m for m in ('jax', 'jaxlib') if m in sys.modules) or None)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"building the parser imported {done.stderr.strip()}"


def pages() -> list[Path]:
    """The documentation: the README, ARCHITECTURE.md, CONTRIBUTING.md and every page of docs/."""
    return [README, ROOT / "ARCHITECTURE.md", CONTRIBUTING, *sorted(DOCS.glob("*.md"))]


def _tiers(page: Path) -> list[str]:
    """The rows of a page's table of test tiers: those that start with a pytest command."""
    return re.findall(r"^\| `python -m pytest.*$", page.read_text("utf-8"), re.M)


def test_contributing_gives_the_readmes_test_tiers() -> None:
    assert _tiers(CONTRIBUTING) == _tiers(README) != []


_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
_CODE = re.compile(r"`+[^`\n]*`+")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _prose(text: str) -> str:
    """``text`` without code blocks and code spans, where brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def links(text: str) -> Iterator[str]:
    yield from _LINK.findall(_prose(text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lowercased, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
        slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
        n, unique = 0, slug
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page.read_text("utf-8")):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif (
            anchor
            and resolved.suffix == ".md"
            and anchor not in anchors(resolved.read_text("utf-8"))
        ):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_resolves() -> None:
    broken = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken_links(p))}
    assert not broken


def test_the_link_check_sees_links() -> None:
    text = "[a](docs/x.md) `[b](no.md)` [c](https://e.com) [d](#top)\n```\n[e](f.md)\n```\n"
    assert list(links(text)) == ["docs/x.md", "https://e.com", "#top"]
    assert anchors("# The `bundle` format\n## ISSUE.md\n## Notes\n## Notes\n") == {
        "the-bundle-format", "issuemd", "notes", "notes-1",
    }  # fmt: skip


def test_every_page_is_linked_from_the_index() -> None:
    index = DOCS / "index.md"
    linked = {(DOCS / target.partition("#")[0]).resolve() for target in links(index.read_text())}
    unlinked = [p.name for p in DOCS.glob("*.md") if p != index and p.resolve() not in linked]
    assert not unlinked
    assert "docs/index.md" in set(links(README.read_text("utf-8")))


def test_no_page_names_a_machines_paths() -> None:
    machine = re.compile(r"/work/|\.venv\b|/home/\w+/|/Users/\w+/|/root/")
    found = {str(p.relative_to(ROOT)): machine.findall(p.read_text("utf-8")) for p in pages()}
    assert not {page: hits for page, hits in found.items() if hits}


if __name__ == "__main__":
    CLI_MD.write_text(render_cli_reference(), "utf-8")
    print(f"wrote {CLI_MD.relative_to(ROOT)}")
