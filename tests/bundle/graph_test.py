"""``show BUNDLE --graph OUT``: a bundled module drawn as a page, read from the archive in place.

The bundle is the real one of a real compile crash; the module to draw is the shrunk one when
there is one, the chosen one otherwise, or the one ``--module`` names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.programs import Collected
from xla_bugkit.cli.commands.show import graph_module
from xla_bugkit.cli.main import main
from xla_bugkit.errors import BugkitError, ExitCode


def test_show_draws_the_bundled_module(
    bundles: Callable[..., Collected], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collected = bundles("compile_crash")
    label = collected.manifest()["modules"][0]["label"]
    page, dot = tmp_path / "m.html", tmp_path / "m.dot"
    assert main(["show", str(collected.bundle), "--graph", str(page)]) == ExitCode.OK
    assert f"wrote {page}: the graph of {label}" in capsys.readouterr().out
    embedded = re.search(r"const dot = (\".*\");", page.read_text())
    assert embedded is not None and json.loads(embedded.group(1)).startswith("digraph")
    argv = ["show", str(collected.bundle), "--graph", str(dot), "--module", "add_noise"]
    assert main(argv) == ExitCode.OK
    assert "ENTRY computation" in dot.read_text() and "_normal" in dot.read_text()
    # Nothing is replaced unasked, and a graph is .html or .dot.
    assert main(["show", str(collected.bundle), "--graph", str(dot)]) == ExitCode.ERROR
    assert "give --force" in capsys.readouterr().err
    assert main(["show", str(collected.bundle), "--graph", str(tmp_path / "m.txt")]) == 1
    assert "--graph writes .html or .dot" in capsys.readouterr().err


def _manifest(*labels: str) -> Any:
    files = {"before_optimizations.hlo.pb": "m.hlo.pb"}
    return {"modules": [{"label": label, "files": files} for label in labels]}


def test_the_shrunk_module_is_drawn_unless_another_is_named() -> None:
    manifest = _manifest("module_0001.jit_f", "module_0001.jit_f.shrunk")
    assert graph_module(manifest, None)["label"] == "module_0001.jit_f.shrunk"
    assert graph_module(manifest, r"jit_f$")["label"] == "module_0001.jit_f"
    with pytest.raises(BugkitError, match="no module with an HLO proto to draw"):
        graph_module(manifest, "jit_g")
