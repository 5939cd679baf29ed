from __future__ import annotations

from xla_bugkit.main import entry

entry()
