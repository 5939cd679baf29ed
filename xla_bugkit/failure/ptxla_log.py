"""What PyTorch/XLA's own log lines tell about a run: the graph it was compiling or executing
when it failed, the Python line that made it compile that graph, and the dumped module that
is that graph.

torch_xla 2.9 raises XLA's errors as a bare ``RuntimeError`` (or ``ValueError``) without the
status code (``RuntimeError: RngBitGenerator should be expanded for CPU.``), and the Python
line in the traceback is the user's ``.item()``: only these lines say the error came from
XLA, and whether compiling or running. The rerun turns both sources on
(``run.adapt``):

- ``TF_CPP_VMODULE=xla_graph_executor=3``: ``... xla_graph_executor.cpp:1492] Compiling IR
  graph hash 5083f43a... on device CPU:0 ...`` before XLA compiles a graph and the same line
  ending ``done!`` after; ``Executing IR graph hash ...`` likewise around each execution;
- ``PT_XLA_DEBUG_LEVEL=1``: a ``Compilation Analysis:`` block before each compilation with
  the same ``Graph Hash:`` and the Python frames that triggered it, and a ``Post Compilation
  Analysis:`` block once it compiled.

Its graphs share module names (``SyncTensorsGraph.N``, N its instruction count), so a graph is
tied to its module by the number XLA dumps it under (``xla_log``) right after the compile
starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePath

from xla_bugkit.failure import xla_log

_GRAPH = re.compile(
    r"\] (?P<what>Compiling|Executing) IR graph hash (?P<hash>[0-9a-f]+) "
    r"on device (?P<device>\S+) (?P<end>\.\.\.|done!)[ \t]*$",
    re.M,
)
_ANALYSIS = "Compilation Analysis:"
_ANALYSIS_HASH = re.compile(r"^Compilation Analysis:\s+Graph Hash: (?P<hash>[0-9a-f]+)\s*$", re.M)
_POST_ANALYSIS = re.compile(r"^Post Compilation Analysis:", re.M)
# "Compilation Analysis:   <module> (/path/train.py:38)", innermost frame first.
_FRAME = re.compile(
    r"^Compilation Analysis:\s+(?P<fn>\S+) \((?P<file>[^()\n]+):(?P<line>\d+)\)\s*$", re.M
)
# Frames of the libraries between the user's line and the compile (torch_xla.sync, ...).
_LIBRARY = re.compile(r"/(?:site|dist)-packages/|/torch_xla/|/torch/")


@dataclass(frozen=True)
class Graph:
    """A graph PyTorch/XLA started compiling or executing."""

    compiling: bool  # False: executing
    hash: str
    offset: int  # where the line that started it is in the output
    trigger: str | None  # "train.py:38": the program's line that made torch_xla compile it

    @property
    def doing(self) -> str:
        return "compiling" if self.compiling else "executing"

    @property
    def describe(self) -> str:
        """``graph 5083f43a3ec6 (compiled for train.py:38)``."""
        made = f" (compiled for {self.trigger})" if self.trigger else ""
        return f"graph {self.hash[:12]}{made}"


def unfinished(output: str) -> Graph | None:
    """The graph PyTorch/XLA was compiling or executing when ``output`` ended: the last one
    it started and never logged ``done!`` for. Without the graph executor's lines, the last
    Compilation Analysis with no Post Compilation Analysis after it (a compile only)."""
    started: dict[tuple[str, str], re.Match[str]] = {}
    for m in _GRAPH.finditer(output):
        key = (m.group("what"), m.group("hash"))
        if m.group("end") == "...":
            started[key] = m
        else:
            started.pop(key, None)
    if started:
        last = max(started.values(), key=lambda m: m.start())
        compiling = last.group("what") == "Compiling"
        graph_hash = last.group("hash")
        return Graph(compiling, graph_hash, last.start(), _trigger(output, graph_hash))
    if _GRAPH.search(output):
        return None  # every graph it started finished: the error came after
    analyses = list(_ANALYSIS_HASH.finditer(output))
    if not analyses or _POST_ANALYSIS.search(output, analyses[-1].end()):
        return None
    found = analyses[-1]
    return Graph(True, found.group("hash"), found.start(), _trigger(output, found.group("hash")))


def _trigger(output: str, graph_hash: str) -> str | None:
    """``file.py:LINE`` of the program's own frame in the newest Compilation Analysis of
    ``graph_hash`` (the first frame outside torch and torch_xla; else the outermost)."""
    analyses = [m for m in _ANALYSIS_HASH.finditer(output) if m.group("hash") == graph_hash]
    if not analyses:
        return None
    start = analyses[-1].end()
    block: list[re.Match[str]] = []
    for m in _FRAME.finditer(output, start):
        between = output[start : m.start()]
        if any(not line.startswith(_ANALYSIS) for line in between.splitlines() if line):
            break  # the block ended
        block.append(m)
        start = m.end()
    if not block:
        return None
    own = next((m for m in block if not _LIBRARY.search(m.group("file"))), block[-1])
    return f"{PurePath(own.group('file')).name}:{own.group('line')}"


def dumped_as(graph: Graph, output: str) -> xla_log.DumpLine | None:
    """The first file XLA dumped while PyTorch/XLA compiled ``graph`` (its newest compile,
    for a graph being executed): that file's module number is the graph's module."""
    compiles = [
        m
        for m in _GRAPH.finditer(output)
        if m.group("what") == "Compiling"
        and m.group("end") == "..."
        and m.group("hash") == graph.hash
        and m.start() <= graph.offset
    ]
    start = compiles[-1].end() if compiles else graph.offset
    following = _GRAPH.search(output, start)
    end = following.start() if following else len(output)
    lines = xla_log.dump_lines(output[start:end])
    return replace(lines[0], offset=lines[0].offset + start) if lines else None
