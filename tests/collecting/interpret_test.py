"""collect's run of a program under Pallas's TPU interpret mode, in real processes on the CPU,
where a Pallas TPU kernel runs only in that mode: the outputs of the kernel's call kept as
the replay's arrays are, whether the program's check passed under it, and why there are no
outputs where there are none. The compiled kernel's side needs a TPU
(``tests/tpu/chip_test.py``)."""

from __future__ import annotations

import io
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import run_record
from xla_bugkit.choose.dumps import DumpModule
from xla_bugkit.collecting import interpret, workdir
from xla_bugkit.collecting.options import CollectOptions
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import Interpreted, protocol
from xla_bugkit.run.evidence import Event, ProcessEvidence
from xla_bugkit.run.processes import Culprit
from xla_bugkit.ui import Ui

WRONG = Failure(Kind.WRONG_RESULT, Phase.UNKNOWN, "AssertionError", "AssertionError", 1)

# ``head`` doubles in a Pallas kernel and adds one; the check after it is the program's own.
PROGRAM = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def head(x):
        return pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1

    if "--before" in sys.argv:
        raise NotImplementedError("no kernel ran")
    got = head((jnp.arange(8 * 128) % 64).astype(jnp.bfloat16).reshape(8, 128))
    want = 3 if "--wrong-check" in sys.argv else 1
    assert float(got[0, 0]) == want, f"first element {float(got[0, 0])}"
    print("ok")
    """
)


def interpreted(
    tmp_path: Path,
    *args: str,
    program: str = PROGRAM,
    timeout: float | None = None,
    stream: io.StringIO | None = None,
) -> Interpreted:
    (tmp_path / "program.py").write_text(program)
    run = run_record("", WRONG, command=(sys.executable, str(tmp_path / "program.py"), *args))
    work = tmp_path / "work"
    work.mkdir()
    module = DumpModule(0, "jit_head.cl_933746096", ())
    stream = stream or io.StringIO()
    options = CollectOptions(output=tmp_path / "b.zip", timeout=timeout)
    found = interpret.interpreted(work, run, module, options, Ui(stream=stream))
    assert found is not None  # no first run's arguments here: nothing says they differ
    said = " ".join(stream.getvalue().split())
    assert "holds a Pallas kernel that no reference outside it can check" in said
    # Its bound is said as a bound; "stopped" only where the run was.
    bound = timeout or interpret.MIN_SECONDS
    assert f"the kernel's reference (at most {bound:.0f} s)" in said, said
    assert ("stopped" in said) == (found.passed is None and "stopped" in found.error), said
    if found.outputs is not None:
        check = "passes" if found.passed else "fails"
        # Run on the CPU first; again on its own platform only where the CPU's run said why.
        where = "on the CPU" if "on its own platform" not in said else "on its platform"
        assert f"under Pallas's interpret mode, {where}" in said, said
        assert f", the program {check}; the call's outputs are kept" in said
    else:
        assert f"Pallas's interpret mode cannot run the kernel: {found.error}" in said
    return found


@pytest.mark.slow
def test_the_kernels_outputs_under_interpret_mode_are_kept_as_a_replays_arrays(
    tmp_path: Path,
) -> None:
    found = interpreted(tmp_path)
    assert (found.error, found.passed) == ("", True)
    assert found.outputs == tmp_path / "work" / workdir.INTERPRET / interpret.OUTPUTS
    (outputs,) = protocol.load_arrays(found.outputs)
    assert outputs.dtype.name == "bfloat16"  # ml_dtypes' types come back as themselves
    want = (np.arange(8 * 128, dtype=np.float32) % 64).reshape(8, 128) * 2 + 1
    assert np.array_equal(outputs.astype(np.float32), want)  # exact in bfloat16
    # A bundle made again from the kept work dir reads the same, the check's outcome unknown.
    again = interpret.kept(tmp_path / "work", run_record("", WRONG), DumpModule(0, "jit_head", ()))
    assert again == Interpreted(found.outputs, "", None)


@pytest.fixture
def unset_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment without the JAX and XLA settings a test before may have
    left in it: the run "on its own platform" has only the program's own."""
    for name in list(os.environ):
        if name.startswith(("JAX_", "XLA_", "LIBTPU_", "TPU_")):
            monkeypatch.delenv(name)


@pytest.mark.slow
@pytest.mark.usefixtures("unset_platform")
def test_a_program_that_cannot_run_on_the_cpu_runs_under_the_mode_on_its_own_platform(
    tmp_path: Path,
) -> None:
    # The mode runs on the CPU first (JAX_PLATFORMS=cpu); a program that asks for its own
    # platform (here, as `jax.devices("tpu")` would on a TPU machine, by that variable) and
    # so ends before the call there runs again without it.
    program = PROGRAM.replace(
        'if "--before"',
        "import os\nif os.environ.get('JAX_PLATFORMS') == 'cpu':\n"
        "    raise RuntimeError('this program runs on its accelerator only')\nif \"--before\"",
    )
    stream = io.StringIO()
    found = interpreted(tmp_path, program=program, stream=stream)
    assert (found.error, found.passed) == ("", True) and found.outputs is not None
    said = " ".join(stream.getvalue().split())
    assert (
        "on the CPU, the program ended before it called jit_head (RuntimeError: this program "
        "runs on its accelerator only): running it under the mode on its own platform"
    ) in said


@pytest.mark.slow
@pytest.mark.usefixtures("unset_platform")
def test_a_call_given_other_inputs_on_the_cpu_runs_under_the_mode_on_its_own_platform(
    tmp_path: Path,
) -> None:
    # A program whose kernel's inputs come out otherwise on the CPU (as a value computed by
    # the chip's own arithmetic would): the CPU's run is no reference for the first run's
    # call, and the run on the program's own platform, with the first run's inputs, is.
    program = PROGRAM.replace(
        "got = head((jnp.arange(8 * 128) % 64)",
        "import os\nshift = 1 if os.environ.get('JAX_PLATFORMS') == 'cpu' else 0\n"
        "got = head((jnp.arange(8 * 128) % 64 + shift)",
    )
    assert program != PROGRAM
    (tmp_path / "program.py").write_text(program)
    command = (sys.executable, str(tmp_path / "program.py"))
    module = DumpModule(0, "jit_head.cl_933746096", ())
    options = CollectOptions(output=tmp_path / "b.zip")
    # The first run's arguments, as the hook saved them in a run without the CPU forced.
    first = tmp_path / "first"
    first.mkdir()
    interpret._interpret_run(first, run_record("", WRONG, command=command), module, options,
                             300, cpu=False)  # fmt: skip
    kept = interpret._kept_arguments(first / workdir.INTERPRET)
    assert kept is not None
    call = Event("execute", 1, "jit_head", 0, args=kept)
    culprit = Culprit(ProcessEvidence(1, 0, command, (call,)), "the failing process")
    run = run_record("", WRONG, command=command, culprit=culprit)
    work = tmp_path / "work"
    work.mkdir()
    stream = io.StringIO()
    found = interpret.interpreted(work, run, module, options, Ui(stream=stream))
    assert found is not None and found.outputs is not None and found.passed is True
    said = " ".join(stream.getvalue().split())
    assert (
        "on the CPU, jit_head took other inputs than in the first run: running it under the "
        "mode on its own platform"
    ) in said
    assert "under Pallas's interpret mode, on its platform, the program passes" in said


@pytest.mark.slow
def test_a_check_that_fails_under_interpret_mode_too_is_recorded(tmp_path: Path) -> None:
    found = interpreted(tmp_path, "--wrong-check")
    assert found.passed is False and found.outputs is not None


@pytest.mark.slow
def test_a_program_that_ends_before_the_call_says_why(tmp_path: Path) -> None:
    found = interpreted(tmp_path, "--before")
    assert found.outputs is None
    assert found.error == "NotImplementedError: no kernel ran"


# A program that never ends by itself: only the run's bound stops it.
SLEEPS = "import time\nprint('sleeping', flush=True)\ntime.sleep(3600)\n"


@pytest.mark.slow
def test_a_run_stopped_at_its_bound_says_it_was_stopped_there(tmp_path: Path) -> None:
    found = interpreted(tmp_path, program=SLEEPS, timeout=5)
    assert found.outputs is None and found.passed is None
    assert found.error == "the program was stopped at its bound of 5 s, before it called jit_head"


def test_only_a_wrong_value_asks_for_the_interpret_mode(tmp_path: Path) -> None:
    crashed = run_record("", Failure(Kind.COMPILE_CRASH, Phase.COMPILE, "F", "F", -6))
    assert interpret.kernel_module(crashed, None, ()) is None  # type: ignore[arg-type]


def test_a_kept_work_dir_without_an_interpret_run_has_no_reference(tmp_path: Path) -> None:
    run = run_record("", WRONG)
    assert interpret.kept(tmp_path, run, DumpModule(0, "jit_head", ())) is None


def test_arguments_are_the_same_only_bit_for_bit(tmp_path: Path) -> None:
    def saved(name: str, *arrays: np.ndarray) -> Path:
        np.savez(tmp_path / name, *arrays)
        return tmp_path / name

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    first = saved("a.npz", x, np.int32(3))
    assert interpret.same_arguments(first, saved("b.npz", x.copy(), np.int32(3)))
    assert not interpret.same_arguments(first, saved("c.npz", x + 1, np.int32(3)))
    assert not interpret.same_arguments(first, saved("d.npz", x.reshape(3, 2), np.int32(3)))
    assert not interpret.same_arguments(first, saved("e.npz", x))
    assert interpret.same_arguments(first, None)  # nothing says they differ
