"""Tests for xla_bugkit.bundle.github: new-issue URLs, their size limit, and the gh command line."""

from __future__ import annotations

import re
import shlex
from urllib.parse import parse_qs, urlsplit

import pytest

from xla_bugkit.bundle.github import (
    BODY_PLACEHOLDER,
    REPOS,
    URL_LIMIT,
    IssueLink,
    check_repo,
    gh_command,
    new_issue_url,
)
from xla_bugkit.errors import BugkitError

TITLE = 'XLA:CPU crash in `jit_train_step`: "const_instr == nullptr" costs $5 & 100% #42'
BODY = (
    "### Description\n\nRun `python train.py` & see #1234 (100% repro).\n"
    "```python\nx = a & b  # 50% off? a=b&c=d\n```\n"
    "Unicode: µs, naïve, 日本語, 🐛\r\ntabs\there + plus + signs\n\n"
    "### System info (python version, jaxlib version, accelerator, etc.)\n\njax 0.10.2\n"
)


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query, keep_blank_values=True, strict_parsing=True)


def test_jax_url_uses_the_non_form_template() -> None:
    link = new_issue_url("jax-ml/jax", "t", "b")
    assert link == IssueLink(
        url="https://github.com/jax-ml/jax/issues/new?template=none&title=t&body=b",
        body_included=True,
    )


def test_jax_url_sets_no_form_fields() -> None:
    # bug-report.yml declares no field ids, so only template/title/body can be set.
    assert list(_query(new_issue_url("jax-ml/jax", TITLE, BODY).url)) == [
        "template",
        "title",
        "body",
    ]


def test_xla_url_has_title_and_body_only() -> None:
    link = new_issue_url("openxla/xla", "a b", "c")
    assert link.url == "https://github.com/openxla/xla/issues/new?title=a%20b&body=c"
    assert link.body_included


@pytest.mark.parametrize("repo", REPOS)
def test_exotic_characters_round_trip(repo: str) -> None:
    link = new_issue_url(repo, TITLE, BODY)
    split = urlsplit(link.url)
    assert (split.scheme, split.netloc, split.path) == (
        "https",
        "github.com",
        f"/{repo}/issues/new",
    )
    assert split.fragment == ""  # a raw '#' would have cut the query short
    assert link.url.isascii()
    query = _query(link.url)
    assert query["title"] == [TITLE]
    assert query["body"] == [BODY]
    assert link.body_included


@pytest.mark.parametrize("repo", REPOS)
def test_long_body_falls_back_to_placeholder(repo: str) -> None:
    body = "### Description\n" + "x & y\n" * 3000
    link = new_issue_url(repo, TITLE, body)
    assert not link.body_included
    assert len(link.url) < URL_LIMIT
    query = _query(link.url)
    assert query["body"] == [BODY_PLACEHOLDER]
    assert query["title"] == [TITLE]


def test_body_that_fits_exactly_under_the_limit_is_kept() -> None:
    full = new_issue_url("openxla/xla", "t", "y" * 100)
    assert new_issue_url("openxla/xla", "t", "y" * 100, limit=len(full.url) + 1).body_included
    tight = new_issue_url("openxla/xla", "t", "y" * 100, limit=len(full.url))
    assert not tight.body_included
    assert len(tight.url) < len(full.url)


def test_title_too_long_for_any_url_is_an_error() -> None:
    with pytest.raises(BugkitError, match=r"^issue title too long for a GitHub link \(300 "):
        new_issue_url("openxla/xla", "t" * 300, "b", limit=200)


@pytest.mark.parametrize("title", [TITLE, "-starts with dash", "it's `$(rm -rf ~)`\nline 2", ""])
def test_gh_command_round_trips_through_shlex(title: str) -> None:
    command = gh_command("jax-ml/jax", title, "/tmp/my bundle/ISSUE.md")
    assert shlex.split(command) == [
        "gh",
        "issue",
        "create",
        "--repo",
        "jax-ml/jax",
        "--title",
        title,
        "--body-file",
        "/tmp/my bundle/ISSUE.md",
    ]


@pytest.mark.parametrize(
    "repo",
    ["jax-ml/jax", "openxla/xla", "a/b", "Owner-1/repo.name_2-x", "o/.github", "x" * 39 + "/r"],
)
def test_good_repos_accepted(repo: str) -> None:
    assert check_repo(repo) == repo


@pytest.mark.parametrize(
    "repo",
    [
        "",
        "jax",
        "jax-ml/",
        "/jax",
        "jax-ml/jax/issues",
        "jax-ml/jax\n",
        " jax-ml/jax",
        "-owner/r",
        "owner-/r",
        "own_er/r",
        "o/..",
        "o/.",
        "o/na me",
        "o/na&me",
        "x" * 40 + "/r",
        "o/" + "r" * 101,
        "https://github.com/jax-ml/jax",
    ],
)
def test_bad_repos_rejected_with_one_line(repo: str) -> None:
    with pytest.raises(BugkitError) as info:
        check_repo(repo)
    assert str(info.value) == (
        f"not a GitHub repository: {repo!r} (expected OWNER/NAME, e.g. jax-ml/jax)"
    )
    assert "\n" not in str(info.value)


def test_bad_repo_rejected_by_every_entry_point() -> None:
    message = "not a GitHub repository: 'jax' (expected OWNER/NAME, e.g. jax-ml/jax)"
    with pytest.raises(BugkitError, match=f"^{re.escape(message)}$"):
        new_issue_url("jax", "t", "b")
    with pytest.raises(BugkitError) as info:
        gh_command("jax", "t", "f")
    assert str(info.value) == message
