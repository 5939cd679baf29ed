"""``xla-bugkit doctor``: is this installation whole? Every module of the package imported,
every data file it reads found, the dependencies' versions, and the pip that ``bisect`` and
``verify --jaxlib`` list releases through.

A module left out of an install fails only when the command that needs it runs, often
after the program it watched has ended; this finds it at once, and says how to reinstall.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from dataclasses import asdict, dataclass, field

from xla_bugkit._version import __version__
from xla_bugkit.cli import options
from xla_bugkit.errors import REINSTALL, ExitCode
from xla_bugkit.ui import Ui

HELP = "check that the installation is whole: modules, data files, dependencies"
DESCRIPTION = (
    "Import every module of xla-bugkit, look for every data file it reads, and print the "
    "versions of its dependencies; say what is missing and how to reinstall."
)
EPILOG = """\
examples:
  xla-bugkit doctor           what is installed, and whether anything is missing
  xla-bugkit doctor --json    the same as JSON
"""

# Every package of xla_bugkit and every data file it reads at run time. An install that
# lacks one is broken; a test holds these equal to the source tree.
PACKAGES = (
    "xla_bugkit",
    "xla_bugkit.archive",
    "xla_bugkit.bisect",
    "xla_bugkit.bundle",
    "xla_bugkit.bundle.manifest",
    "xla_bugkit.choose",
    "xla_bugkit.cli",
    "xla_bugkit.cli.commands",
    "xla_bugkit.collecting",
    "xla_bugkit.convert",
    "xla_bugkit.examples",
    "xla_bugkit.failure",
    "xla_bugkit.hlo",
    "xla_bugkit.jaxlib_adapter",
    "xla_bugkit.notebook",
    "xla_bugkit.proc",
    "xla_bugkit.redact",
    "xla_bugkit.releases",
    "xla_bugkit.replay",
    "xla_bugkit.replay.child",
    "xla_bugkit.run",
    "xla_bugkit.run.hook",
    "xla_bugkit.shrink",
    "xla_bugkit.templates",
    "xla_bugkit.verdict",
    "xla_bugkit.verify",
)
DATA_FILES = (
    ("xla_bugkit.templates", "issue.md"),
    ("xla_bugkit.templates", "issue-tensorflow.md"),
    ("xla_bugkit.templates", "issue-pytorch-xla.md"),
    ("xla_bugkit.templates", "repro.py.in"),
    # The start-up hook's folder: not a package, on purpose (nothing in it may shadow a
    # module of the program's).
    ("xla_bugkit.run.hook", "site/sitecustomize.py"),
)
# Not imported: the package's own ``python -m`` entry, and the start-up hook's folder,
# whose sitecustomize runs the hook when imported.
_NOT_IMPORTED = ("xla_bugkit.__main__", "xla_bugkit.run.hook.site")
DEPENDENCIES = ("jax", "jaxlib", "protobuf", "py7zr", "platformdirs", "pip")


@dataclass
class Report:
    """What ``doctor`` found."""

    version: str
    location: str
    python: str
    modules: int = 0
    missing: list[str] = field(default_factory=list)  # "module: why"
    dependencies: dict[str, str | None] = field(default_factory=dict)

    @property
    def whole(self) -> bool:
        return not self.missing and all(
            self.dependencies.get(d) for d in DEPENDENCIES if d != "pip"
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_json(p, "print the report as JSON on stdout")


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Check the installation, print what was found; exit 1 when anything is missing."""
    report = check()
    options.emit(
        args.json, lambda: {**asdict(report), "whole": report.whole}, lambda: render(report)
    )
    return ExitCode.OK if report.whole else ExitCode.ERROR


def check() -> Report:
    """Import every module, look for every data file, read the dependencies' versions."""
    from importlib import metadata, resources  # tens of ms: not on every command's start

    report = Report(
        __version__,
        str(resources.files("xla_bugkit")),
        f"Python {sys.version.split()[0]} ({sys.executable})",
    )
    for name in PACKAGES:
        if not _imports(name, report):
            continue
        for found in pkgutil.iter_modules(sys.modules[name].__path__, f"{name}."):
            if found.name not in _NOT_IMPORTED and not found.ispkg:
                _imports(found.name, report)
    for package, name in DATA_FILES:
        try:
            if not resources.files(package).joinpath(name).is_file():
                report.missing.append(f"{package}/{name}: not installed")
        except ModuleNotFoundError:
            pass  # the package itself is already said to be missing
    for dist in DEPENDENCIES:
        try:
            report.dependencies[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            report.dependencies[dist] = None
    return report


def _imports(name: str, report: Report) -> bool:
    try:
        importlib.import_module(name)
    except Exception as e:  # any import failure is what this command is for
        report.missing.append(f"{name}: {type(e).__name__}: {e}")
        return False
    report.modules += 1
    return True


def render(report: Report) -> str:
    """What ``check`` found, and what to do about what is missing."""
    versions = ", ".join(f"{d} {v or 'MISSING'}" for d, v in report.dependencies.items())
    lines = [
        f"xla-bugkit {report.version} at {report.location}",
        f"  {report.python}",
        f"  {report.modules} modules import",
        f"  {versions}",
        *[f"  missing: {what}" for what in report.missing],
    ]
    if report.whole:
        return "\n".join([*lines, "the installation is whole"])
    absent = [d for d, v in report.dependencies.items() if v is None and d != "pip"]
    if absent:
        lines.append(
            f"not installed: {', '.join(absent)}: python -m pip install {' '.join(absent)}"
        )
    if report.missing:
        lines.append(f"this installation of xla-bugkit is incomplete: {REINSTALL}")
    return "\n".join(lines)
