"""Notebooks run under collect: ``jupyter execute`` and ``jupyter nbconvert --execute`` of a
notebook whose cell fails inside XLA, and the IPython extension."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, Collected, run_collect
from xla_bugkit.notebook.cells import script

JUPYTER = Path(sys.executable).with_name("jupyter")
# Generous: a kernel that imports jax on a busy machine takes its time to start.
STARTUP = str(int(READY_TIMEOUT))


def needs_jupyter() -> None:
    for module in ("nbclient", "nbconvert", "ipykernel"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install '.[notebook]')")
    if not JUPYTER.exists():
        pytest.skip(f"no jupyter command next to {sys.executable}")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


@pytest.fixture(scope="module")
def executed(tmp: Path) -> Collected:
    needs_jupyter()
    notebook = PROGRAMS / "nb_runtime_error.ipynb"
    argv = [str(JUPYTER), "execute", f"--startup_timeout={STARTUP}", str(notebook)]
    return run_collect(tmp / "executed.zip", argv, cwd=tmp)


@pytest.fixture(scope="module")
def converted(tmp: Path) -> Collected:
    needs_jupyter()
    notebook = PROGRAMS / "nb_compile_crash.ipynb"
    argv = [str(JUPYTER), "nbconvert", "--to", "notebook", "--execute",
            f"--ExecutePreprocessor.startup_timeout={STARTUP}",
            "--output", str(tmp / "ran.ipynb"), str(notebook)]  # fmt: skip
    return run_collect(tmp / "converted.zip", argv, cwd=tmp)


@pytest.mark.slow
def test_jupyter_execute_a_cell_failing_at_runtime(executed: Collected) -> None:
    # Reproduced; more memory than any machine has: not XLA's bug, so 3.
    assert executed.returncode == 3, executed.stderr
    m = executed.manifest()
    # The kernel's coloured traceback, after nbclient's CellExecutionError, tells the kind.
    assert m["failure"]["kind"] == "runtime error"
    assert m["failure"]["status_code"] == "RESOURCE_EXHAUSTED"
    first = m["modules"][0]
    assert first["name"] == "jit__lambda"
    # The failing metric, not its same-name sibling: its module broadcasts to 2**20 x 2**20.
    before = executed.text(f"modules/{first['label']}/{first['label']}.before_optimizations.txt")
    assert "f32[1048576,1048576]" in before
    assert first["replay"]["outcome"] == "reproduced: error"


@pytest.mark.slow
def test_jupyter_nbconvert_execute_a_kernel_that_dies_compiling(converted: Collected) -> None:
    assert converted.returncode == 0, converted.stderr
    m = converted.manifest()
    assert m["failure"]["kind"] == "compile crash"
    assert m["failure"]["site"] == "buffer_assignment_util.cc:46"
    first = m["modules"][0]
    assert first["name"] == "jit_add_noise"
    # JAX's compile log went to the dead kernel's notebook output; XLA's own log did not.
    assert (
        f"XLA's log: {first['label']}.debug_options was the last file dumped before its first "
        "fatal line (buffer_assignment_util.cc:46)"
    ) in first["reasons"]
    assert first["replay"]["outcome"] == "reproduced: crash"


# --- the IPython extension, in a real kernel ----------------------------------------------

MAGIC_CELLS = [
    "%load_ext xla_bugkit",
    "import os\n\nimport jax\nimport jax.numpy as jnp\n%env XLA_BUGKIT_NOTEBOOK_TEST=1",
    "w = jnp.eye(8)\nfor _ in range(3):\n    w = jax.jit(lambda w: w @ w * 0.5)(w)\n"
    "if os.environ.get('XLA_BUGKIT_NOTEBOOK_TEST'):\n    !echo a shell escape",
    "metrics = [\n    jax.jit(lambda a: jnp.mean(a)),\n"
    "    jax.jit(lambda a: jnp.broadcast_to(a.mean(), (1 << 20, 1 << 20)) * 2),\n]\n"
    "print(float(metrics[0](w)))\nprint(float(metrics[1](w)[0, 0]))",
    "print('after the failure: not part of the rerun')",
    "%xla_bugkit collect -o magic.zip",
]


@pytest.mark.slow  # a real kernel running real jax, then collect
def test_the_magic_reruns_the_cells_up_to_the_failing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_jupyter()
    import nbformat
    from nbclient import NotebookClient

    cells = [nbformat.v4.new_code_cell(source) for source in MAGIC_CELLS]
    cells[3].metadata["tags"] = ["raises-exception"]  # the failure the user saw
    notebook = nbformat.v4.new_notebook(cells=cells)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    client = NotebookClient(notebook, kernel_name="python3", timeout=None,
                            startup_timeout=int(READY_TIMEOUT),
                            resources={"metadata": {"path": str(tmp_path)}})  # fmt: skip
    client.execute()
    said = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert "rerunning the notebook's cells" in said, said
    done = Collected(0, said, tmp_path / "magic.zip")
    m = done.manifest()
    assert m["failure"]["kind"] == "runtime error"
    first = m["modules"][0]
    before = done.text(f"modules/{first['label']}/{first['label']}.before_optimizations.txt")
    assert first["name"] == "jit__lambda" and "f32[1048576,1048576]" in before
    assert "not part of the rerun" not in done.text("log.txt")
    assert "a shell escape" not in done.text("log.txt")


# --- the cells as a script -----------------------------------------------------------------


def test_magics_become_pass_and_cell_magics_are_left_out() -> None:
    def transform(source: str) -> str:  # what IPython's transform_cell makes of magics
        return source.replace("%env A=1", "get_ipython().run_line_magic('env', 'A=1')")

    cells = {1: "import os", 2: "%%time\nx = 1", 3: "if True:\n    %env A=1", 4: "", 5: "y = 2"}
    assert script(cells, transform, upto=3) == (
        "# In[1]:\nimport os\n\n"
        "# In[2]: left out (a cell magic, IPython only)\n\n"
        "# In[3]:\nif True:\n    pass  # left out (IPython only): "
        "get_ipython().run_line_magic('env', 'A=1')\n"
    )
    assert script(cells, transform).endswith("# In[5]:\ny = 2\n")
