from __future__ import annotations

from xla_bugkit.cli.main import entry

entry()
