"""The public API: what ``xla_bugkit`` exports, and what importing it costs a child."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import xla_bugkit


@pytest.mark.parametrize("name", sorted(set(xla_bugkit.__all__) - {"__version__"}))
def test_every_public_name_resolves_to_its_home(name: str) -> None:
    value = getattr(xla_bugkit, name)
    home = importlib.import_module(value.__module__)
    assert getattr(home, name) is value
    assert name in dir(xla_bugkit)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = xla_bugkit.nope  # type: ignore[attr-defined]


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return set(json.loads(done.stdout))


def test_the_replay_child_starts_without_archives_or_the_pipeline() -> None:
    # The worker runs once per replay: what its imports pull in, every replay pays for.
    loaded = _loaded_after("import xla_bugkit.replay.child.worker")
    assert not {"py7zr", "xla_bugkit.collecting", "xla_bugkit.archive", "jax"} & loaded


def test_importing_the_package_loads_no_stage() -> None:
    loaded = _loaded_after("import xla_bugkit")
    assert not {m for m in loaded if m.startswith("xla_bugkit.")} - {
        "xla_bugkit._lazy",
        "xla_bugkit._version",
    }


def test_collect_starts_the_program_before_importing_the_stages_after_it() -> None:
    # Everything the CLI imports before the program starts delays the program; what runs
    # after it (archives, numpy, protos, the bundle) is imported while it runs.
    # The command imports the driver when it runs, before the program starts.
    loaded = _loaded_after(
        "import xla_bugkit.cli.main, xla_bugkit.cli.commands.collect, xla_bugkit.collecting.driver"
    )
    heavy = {"py7zr", "numpy", "google.protobuf", "jax", "ml_dtypes"}
    stages = {
        "xla_bugkit.collecting.bundling",
        "xla_bugkit.collecting.stages",
        "xla_bugkit.bundle.build",
        "xla_bugkit.archive.write",
        "xla_bugkit.replay.judge",
        # Reading the run once it has ended: its failure, the dumps, the module's choice.
        "xla_bugkit.failure.classify",
        "xla_bugkit.run.weigh",
        "xla_bugkit.choose.selection",
        "xla_bugkit.choose.search",
        "importlib.metadata",
    }
    assert not (heavy | stages) & loaded
    assert "xla_bugkit.collecting.driver" in loaded or "xla_bugkit.collecting.options" in loaded


def test_the_archive_package_loads_its_readers_on_first_use() -> None:
    loaded = _loaded_after("from xla_bugkit.archive.naming import output_format")
    assert "py7zr" not in loaded
    loaded = _loaded_after("from xla_bugkit.archive import write_archive")
    assert {"py7zr", "xla_bugkit.archive.write"} <= loaded


def test_building_the_command_line_parser_imports_nothing_heavy() -> None:
    # Every command pays for the parser before it starts: its subcommands' arguments come
    # from modules that must leave replays, bundles and numpy to the command that runs.
    loaded = _loaded_after("import xla_bugkit.cli.grammar as cli\ncli.parser()")
    heavy = {"py7zr", "numpy", "google.protobuf", "jax", "ml_dtypes"}
    assert not heavy & loaded
    assert not {
        m
        for m in loaded
        if m.startswith(
            ("xla_bugkit.replay.judge", "xla_bugkit.bisect.run", "xla_bugkit.collecting.options")
        )
    }
