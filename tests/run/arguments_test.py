"""Snapshots made from the arguments the hook saved for multi-device executions, which XLA
writes no snapshot of: real hooked runs, real dumps, real replays."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.helpers.programs import PROGRAMS, hooked_env, run, run_collect
from xla_bugkit.choose import dumps
from xla_bugkit.choose.dumps import Role
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode
from xla_bugkit.hlo import hlo_proto, literal
from xla_bugkit.run import arguments, evidence_files

# A sharded execution of a two-parameter module on four devices, one of them a Python
# scalar (jax casts it to f32 on the way in), and a pmap (a jit over 4 partitions in jax 0.10).
PROGRAM = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(jax.devices(), ("i",))
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, PartitionSpec("i")))
    print(jax.jit(lambda x, y: x * y + 1.0)(x, 3.0).sum())
    print(jax.pmap(lambda v: v * 2.0)(jnp.ones((4, 3))).sum())
    @jax.jit
    def scaled(w, s):  # bfloat16 arguments: np.savez keeps them as raw 2-byte voids
        return (w * s).astype(jnp.float32).sum()
    print(scaled(jnp.arange(8, dtype=jnp.bfloat16) / 4, jnp.bfloat16(1.5)))
    """
)


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("arguments")
    (work / "program.py").write_text(PROGRAM)
    done = run([sys.executable, "program.py"], hooked_env(work), work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work


def _snapshots(dump_dir: Path) -> list[Path]:
    return sorted(dump_dir.glob(f"*.snapshot.{arguments.RECORDED}-*.pb"))


def test_saved_arguments_become_a_snapshot_of_their_module(hooked: Path) -> None:
    dump_dir = hooked / "dump"
    notes = arguments.write_snapshots(dump_dir, evidence_files.load(hooked))
    (made,) = [p for p in _snapshots(dump_dir) if "jit__lambda" in p.name]
    snapshot = hlo_proto.read_snapshot(made)
    x, y = (literal.literal_to_numpy(a) for a in snapshot.arguments)
    assert np.array_equal(x, np.arange(16.0, dtype=np.float32))
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and float(y) == 3.0
    assert not snapshot.HasField("result")  # the run's result was never read back
    # The dump index takes it as a snapshot of that very module.
    index = dumps.index(dump_dir)
    (module,) = [m for m in index.modules if m.name == "jit__lambda" and m.all(Role.SNAPSHOT)]
    assert module.newest_snapshot is not None and module.newest_snapshot.name == made.name
    assert made.name.startswith(module.label)
    # pmap's module takes the whole stacked array, as the hook saved it.
    pmapped = [p for p in _snapshots(dump_dir) if "jit__fun" in p.name]
    assert len(pmapped) == 1 and notes == []
    (ones,) = (literal.literal_to_numpy(a) for a in hlo_proto.read_snapshot(pmapped[0]).arguments)
    assert np.array_equal(ones, np.ones((4, 3), np.float32))


def test_bfloat16_arguments_become_a_snapshot_too(hooked: Path) -> None:
    """np.savez stores an ml_dtypes array as raw bytes ("|V2"): the parameter's element type
    says what they are (they were left out: "numpy dtype |V2 has no XLA element type")."""
    dump_dir = hooked / "dump"
    notes = arguments.write_snapshots(dump_dir, evidence_files.load(hooked))
    assert not [n for n in notes if "scaled" in n], notes
    (made,) = [p for p in _snapshots(dump_dir) if "jit_scaled" in p.name]
    w, s = (literal.literal_to_numpy(a) for a in hlo_proto.read_snapshot(made).arguments)
    assert isinstance(w, np.ndarray) and w.dtype == ml_dtypes.bfloat16
    assert np.array_equal(w.astype(np.float32), np.arange(8, dtype=np.float32) / 4)
    assert isinstance(s, np.ndarray) and float(s) == 1.5


def test_a_second_pass_keeps_what_is_there_and_broken_saves_are_notes(hooked: Path) -> None:
    dump_dir = hooked / "dump"
    processes = evidence_files.load(hooked)
    arguments.write_snapshots(dump_dir, processes)
    before = {p.name: p.read_bytes() for p in _snapshots(dump_dir)}
    assert before
    arguments.write_snapshots(dump_dir, processes)  # a second bundle from a kept run
    assert {p.name: p.read_bytes() for p in _snapshots(dump_dir)} == before
    # Saved arrays that do not fit the module, or a file cut short (a crash while the hook
    # wrote it), are reported, not raised, and leave no snapshot.
    for path in _snapshots(dump_dir):
        path.unlink()
    saved = {e.module: e.args for p in processes for e in p.events if e.args is not None}
    np.savez(saved["jit__fun"], np.ones((2, 3), np.int32))  # type: ignore[arg-type]
    lam = saved["jit__lambda"]
    assert lam is not None
    lam.write_bytes(lam.read_bytes()[:40])
    notes = arguments.write_snapshots(dump_dir, processes)
    assert any("jit__lambda" in n and "cannot be read" in n for n in notes), notes
    assert any("jit__fun" in n and "argument 0 is s32[2,3], the parameter f32[4,3]" in n
               for n in notes), notes  # fmt: skip
    assert not [p for p in _snapshots(dump_dir) if "jit__fun" in p.name or "lambda" in p.name]


@pytest.mark.slow
def test_a_sharded_wrong_result_is_bundled_and_verified_with_its_real_inputs(
    tmp_path: Path,
) -> None:
    # The search's budget is wall time: on a loaded machine the default may end it first.
    argv = [sys.executable, str(PROGRAMS / "sharded_wrong.py")]
    c = run_collect(tmp_path / "b.zip", argv, "--budget", "30m")
    assert c.returncode == ExitCode.OK, c.stderr[-3000:]
    m = c.manifest()
    assert m["data"].startswith("real inputs (recorded by the capture hook")
    (module,) = [e for e in m["modules"] if e["label"].endswith("jit_energies")]
    assert module["replay"]["outcome"] == "reproduced: wrong result"
    assert module["replay"]["inputs"] == "snapshot"
    assert m["process"]["devices"] == 2
    # The bundle's inputs are the program's own array, not generated ones.
    (x,) = c.recorded_inputs("jit_energies")  # a two-device module: no repro.py
    rows = np.arange(2 * 16_385, dtype=np.float64)
    assert np.array_equal(x, np.stack((rows, 0 * rows, 0 * rows), axis=1))
    assert main(["verify", "-q", str(c.bundle)]) == ExitCode.OK


def test_collect_starts_without_ml_dtypes() -> None:
    # Its import costs ~0.8 s before the program starts; only saved arguments need it.
    code = "import sys, xla_bugkit.cli.commands.collect; print('ml_dtypes' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "False"


@pytest.mark.jax
def test_tensorflow_inputs_become_a_snapshot_of_the_functions_newest_module(
    tmp_path: Path,
) -> None:
    # A real module (made by jax: the suite has no TensorFlow) under the name TensorFlow
    # gives a jit_compile function's module, twice, and the records its hook writes.
    dump = tmp_path / "dump"
    program = ("import jax, jax.numpy as jnp\n"
               "print(jax.jit(lambda x, v, m: (x + v) @ m)(jnp.ones((5, 3)), jnp.ones(3), "
               "jnp.eye(3)))\n")  # fmt: skip
    env = {**hooked_env(tmp_path), "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_proto"}
    env.pop("PYTHONPATH", None)  # no hook: the records are written here, as TF's would be
    done = run([sys.executable, "-c", program], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (before,) = dump.glob("module_*.jit__lambda.before_optimizations.hlo.pb")
    tf_name = "a_inference_f_7__XlaMustCompile_true_config_proto_1_executor_type_2_.4"
    for number in ("0003", "0009"):  # an older compilation of the same function, and newest
        (dump / f"module_{number}.{tf_name}.before_optimizations.hlo.pb").write_bytes(
            before.read_bytes()
        )
    before.unlink()
    folder = tmp_path / evidence_files.PROCESSES
    folder.mkdir(exist_ok=True)
    x, v, m = np.arange(15.0).reshape(5, 3), np.full(3, 0.5), np.eye(3) * 2
    # TensorFlow makes a constant of an input the module needs while compiling: one more
    # array than parameters, which the others skip over in order.
    shape_input = np.array([5, 3], np.int32)
    np.savez(folder / "77.args-4.npz", x.astype(np.float32), shape_input,
             v.astype(np.float32), m.astype(np.float32))  # fmt: skip
    (folder / "77.jsonl").write_text(
        '{"e": "start", "t": 1.0, "pid": 77, "ppid": 1}\n'
        '{"e": "inputs", "t": 2.0, "n": 4, "file": "77.args-4.npz", "bytes": 100, '
        '"fun": "__inference_f_7", "framework": "tensorflow"}\n'
        '{"e": "inputs", "t": 3.0, "n": 5, "file": "77.args-5.npz", "bytes": 100, '
        '"fun": "__inference_f_71", "framework": "tensorflow"}\n'  # another function
    )
    processes = evidence_files.load(tmp_path)
    assert [i.function for p in processes for i in p.inputs] == [
        "__inference_f_7", "__inference_f_71"]  # fmt: skip
    assert arguments.write_snapshots(dump, processes) == []
    (made,) = _snapshots(dump)
    assert made.name == f"module_0009.{tf_name}.snapshot.{arguments.RECORDED}-4.pb"
    got = [literal.literal_to_numpy(a) for a in hlo_proto.read_snapshot(made).arguments]
    assert [a.tolist() for a in got] == [x.tolist(), v.tolist(), m.tolist()]
