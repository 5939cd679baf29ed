"""The install line ISSUE.md gives a maintainer: one that works for this xla-bugkit."""

from __future__ import annotations

import json
from email.message import Message
from importlib import metadata

import pytest

from xla_bugkit.bundle import installed


class _Dist:
    """The two things ``install_command`` reads of an installed distribution."""

    def __init__(self, urls: list[str], direct: dict[str, object] | None) -> None:
        self.metadata = Message()
        for url in urls:
            self.metadata["Project-URL"] = url
        self.version = "0.1.0"
        self._direct = direct

    def read_text(self, name: str) -> str | None:
        return json.dumps(self._direct) if name == "direct_url.json" and self._direct else None


@pytest.mark.parametrize(
    ("urls", "direct", "line"),
    [
        # The project names its source: pipx installs from there.
        (["Homepage, https://example.org/docs", "Source, https://github.com/o/xla-bugkit"], None,
         "pipx install git+https://github.com/o/xla-bugkit"),
        # Installed from a clone of the repository: that repository, at that commit.
        ([], {"url": "https://github.com/o/xla-bugkit.git",
              "vcs_info": {"vcs": "git", "commit_id": "0123abc"}},
         "pipx install git+https://github.com/o/xla-bugkit.git@0123abc"),
        # A local checkout names no place a maintainer can reach, and a package index may
        # not have its version: a clone of the repository, not `pip install xla-bugkit==0.1.0`.
        ([], {"url": "file:///home/me/xla-bugkit", "dir_info": {"editable": True}},
         installed.FROM_CLONE),
    ],
)  # fmt: skip
def test_the_install_line_follows_where_it_came_from(
    urls: list[str], direct: dict[str, object] | None, line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(urls, direct))
    assert installed.install_command() == line
