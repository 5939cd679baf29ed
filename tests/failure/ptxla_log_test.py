"""ptxla_log: PyTorch/XLA's graph log, read from the real output of
tests/programs/ptxla_compile_error.py (torch_xla 2.9 on CPU, as collect runs it)."""

from __future__ import annotations

from tests.frameworks.frameworks_test import real
from xla_bugkit.failure import ptxla_log
from xla_bugkit.failure.classify import Kind, Phase, Stop, classify

EVAL_GRAPH = "5083f43a3ec62b426cf4d7320a4b7d29"  # compiled for line 38, and failed
STEP_GRAPH = "cd55baacc14955a567986c8f4bcbd981"  # steps 1 and 2 (step 0's differs)


def test_the_graph_whose_compile_never_finished() -> None:
    log = real("ptxla_compile_error.log")
    graph = ptxla_log.unfinished(log)
    assert graph is not None and graph.compiling and graph.hash == EVAL_GRAPH
    # The program's own line, not torch_xla's frames.
    assert graph.trigger == "ptxla_compile_error.py:38"
    assert graph.describe == "graph 5083f43a3ec6 (compiled for ptxla_compile_error.py:38)"
    line = ptxla_log.dumped_as(graph, log)
    assert (
        line is not None and line.file == "module_0002.SyncTensorsGraph.96.before_optimizations.txt"
    )
    assert log[line.offset :].startswith("Dumping module_0002.")


def test_an_execution_is_tied_to_the_module_of_its_compile() -> None:
    log = real("ptxla_compile_error.log")
    # Cut as if the run had died inside step 2's execution of the graph step 1 compiled.
    start = f"Executing IR graph hash {STEP_GRAPH} on device CPU:0 ...\n"
    cut = log[: log.index(start, log.index("step 1 loss")) + len(start)]
    graph = ptxla_log.unfinished(cut)
    assert graph is not None and not graph.compiling and graph.hash == STEP_GRAPH
    assert graph.trigger == "ptxla_compile_error.py:33"  # past torch_xla.sync's frame
    line = ptxla_log.dumped_as(graph, cut)
    assert line is not None and line.id == 1


def test_a_run_whose_graphs_all_finished_has_none_unfinished() -> None:
    log = real("ptxla_compile_error.log")
    assert ptxla_log.unfinished(log[: log.index("step 2 loss")]) is None
    assert ptxla_log.unfinished("step 0\nRuntimeError: x\n") is None


def test_a_stop_while_pytorch_xla_compiles_a_graph_is_a_hang() -> None:
    """The real log of ptxla_compile_error.py, cut where torch_xla started compiling its third
    graph: what a Ctrl-C or collect's timeout leaves when that compile never ends."""
    log = real("ptxla_compile_error.log")
    started = f"Compiling IR graph hash {EVAL_GRAPH} on device CPU:0 ..."
    cut = log[: log.index(started) + len(started)] + "\n"
    failure = classify(cut, exit_status=-2, interrupted=True, stop=Stop("user", 95.0, 90.0))
    assert failure.kind is Kind.HANG and failure.phase is Phase.COMPILE
    assert failure.headline.startswith("PyTorch/XLA was compiling graph 5083f43a3ec6")
    assert failure.headline.endswith("with no output for 90 s; stopped by the user after 95 s")
    assert failure.compiling is None  # a graph, not a JAX function to look up by name
