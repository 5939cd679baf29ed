"""Links and commands that open a prefilled GitHub issue: text only, never the network."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from xla_bugkit.errors import BugkitError

# Where reports go: JAX, TensorFlow, PyTorch/XLA, and XLA itself (see ``frameworks``).
REPOS = ("jax-ml/jax", "tensorflow/tensorflow", "pytorch/xla", "openxla/xla")

# GitHub answers 414 for new-issue URLs past roughly 8 KB; stay under it.
URL_LIMIT = 8000

BODY_PLACEHOLDER = "Paste ISSUE.md from the attached bundle here."

# Owner: GitHub's login rule (letters, digits, inner hyphens, at most 39 characters).
# Name: letters, digits, '.', '_', '-', at most 100 characters; '.' and '..' are reserved.
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?"
_NAME = r"[A-Za-z0-9._-]{1,100}"
_REPO_RE = re.compile(rf"({_OWNER})/({_NAME})")

# Query parameters that come before the title, per repository.
# jax-ml/jax disables blank issues, and its bug form (.github/ISSUE_TEMPLATE/bug-report.yml)
# gives its "Description" and "System info" textareas no `id:`, and GitHub prefills a form
# field only through its id. `template=none` is jax's documented non-form link, which takes
# `body`. No `labels=bug`: GitHub honours URL labels only for users allowed to set labels.
_LEAD_PARAMS: dict[str, dict[str, str]] = {
    "jax-ml/jax": {"template": "none"},
}


@dataclass(frozen=True)
class IssueLink:
    """A new-issue URL, and whether the whole body travels in it."""

    url: str
    body_included: bool


def check_repo(repo: str) -> str:
    """Return ``repo`` if it is exactly ``OWNER/NAME`` as GitHub allows; else raise BugkitError."""
    match = _REPO_RE.fullmatch(repo)
    if match is None or match.group(2) in (".", ".."):
        # repr() keeps the message on one line even when the input holds a newline.
        raise BugkitError(
            f"not a GitHub repository: {repo!r} (expected OWNER/NAME, e.g. jax-ml/jax)"
        )
    return repo


def new_issue_url(repo: str, title: str, body: str, *, limit: int = URL_LIMIT) -> IssueLink:
    """Build the ``issues/new`` URL for ``repo`` with ``title`` and ``body`` prefilled.

    When the body would push the URL to ``limit`` characters or more, the URL carries
    ``BODY_PLACEHOLDER`` instead and ``body_included`` is False: the caller must then point
    the user at the bundle's ISSUE.md (or ``gh_command``). A body is never cut short.
    """
    check_repo(repo)
    url = _build(repo, title, body)
    if len(url) < limit:
        return IssueLink(url=url, body_included=True)
    url = _build(repo, title, BODY_PLACEHOLDER)
    if len(url) >= limit:
        raise BugkitError(
            f"issue title too long for a GitHub link ({len(title)} characters); shorten it"
        )
    return IssueLink(url=url, body_included=False)


def gh_command(repo: str, title: str, body_file: str) -> str:
    """Return the ``gh issue create`` command line that files the issue, shell-quoted."""
    check_repo(repo)
    argv = ["gh", "issue", "create", "--repo", repo, "--title", title, "--body-file", body_file]
    return shlex.join(argv)


def _build(repo: str, title: str, body: str) -> str:
    params = {**_LEAD_PARAMS.get(repo, {}), "title": title, "body": body}
    # quote (not quote_plus): '%20' for spaces reads the same to GitHub and to parse_qs,
    # and safe="" (urlencode's default) escapes '/', '?', '&', '#' inside values.
    return f"https://github.com/{repo}/issues/new?{urlencode(params, quote_via=quote)}"
