"""``xla-bugkit convert IN OUT``: a module from one form to another (``xla_bugkit.convert``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit.cli import options
from xla_bugkit.errors import ExitCode
from xla_bugkit.ui import Ui

HELP = "a module from one form to another: HLO text, .hlo.pb, StableHLO, a graph"
DESCRIPTION = (
    "Convert a module between HLO text, the .hlo.pb proto, StableHLO (text or bytecode), "
    "metadata-free text for older releases, and a graph (DOT or HTML), as XLA's hlo-opt does, "
    "without Bazel. The input's form is read from its content."
)
EPILOG = """\
examples:
  xla-bugkit convert module_0006.jit_f.before_optimizations.hlo.pb jit_f.txt
      the module as HLO text, metadata included
  xla-bugkit convert jit_f.txt jit_f.mlir
      as StableHLO (MLIR text); .mlirbc for bytecode
  xla-bugkit convert jit_f.mlir jit_f.hlo.pb
      back to an HloProto, as XLA dumps it
  xla-bugkit convert --to hlo-short jit_f.hlo.pb old.txt
      text without metadata, which older jaxlib releases parse
  xla-bugkit convert jit_f.hlo.pb jit_f.html
      the graph, as a page that renders it (.dot for Graphviz's source)
  xla-bugkit convert --to literals jit_f.snapshot.0.pb inputs.literals.pb
      a snapshot's inputs for run_hlo_module --input_literals_file
"""

# Kept here so that the help needs no import of the conversion code.
FORMS = ("hlo", "hlo-short", "pb", "stablehlo", "mlirbc", "dot", "html", "literals")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source",
        type=Path,
        metavar="IN",
        help="HLO text, an .hlo.pb or HloSnapshot, StableHLO text or bytecode",
    )
    p.add_argument(
        "out",
        type=Path,
        metavar="OUT",
        help="the file to write; its suffix names the form (.txt .hlo .pb .mlir .mlirbc "
        ".dot .html)",
    )
    p.add_argument("--to", choices=FORMS, help="the form to write, whatever OUT's suffix")
    options.add_force(p, "replace OUT if it exists")


def run(args: argparse.Namespace, ui: Ui) -> int:
    from xla_bugkit.convert import convert

    source: Path = args.source
    out: Path = args.out
    with ui.phase(f"converting {source.name}"):
        notes = convert(source, out, to=args.to, force=args.force)
    for note in notes:
        ui.warn(note)
    ui.say(f"wrote {out}")
    return ExitCode.OK
