"""Real jax programs for tests: the failing programs in tests/programs, run by hand
(``ProgramRuns``, behind the ``program_runs`` fixture) or through the installed
``xla-bugkit collect`` (``run_collect``), and how a test waits for them.

Every jax process costs seconds to start, so the programs that several test modules need
(tests/programs/*.py and a small two-function program) run once, two at a time, in the
background from the first test that asks for them; a test waits only for the run it reads.

Nothing here depends on how fast the machine is: importing jax can take 15 s under load, so
every bound is generous, and a hang is stopped only once the program says it is inside XLA
(``wait_for_file``), never after a fixed delay.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers import marks, shared
from xla_bugkit import proc
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import Failure
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.hlo_proto import HloSnapshot
from xla_bugkit.hlo.literal import literal_to_numpy, shape_of
from xla_bugkit.run import evidence_files, rerun
from xla_bugkit.run.record import RunRecord

TESTS = Path(__file__).resolve().parents[1]
PROGRAMS = TESTS / "programs"
# The longest a test waits for a program to get where it wants it: only a broken run takes
# this long, so it can be generous.
READY_TIMEOUT = 900.0
XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))  # the installed command

# Two jitted functions and some jnp helper calls (each helper compiles its own module).
# The big constant shows whether --xla_dump_large_constants reached XLA.
TWO_FUNCTIONS = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    TABLE = np.arange(2000, dtype=np.float32)

    @jax.jit
    def step(w, x):
        return jnp.tanh(x @ w).sum()

    @jax.jit
    def scale(x):
        return x * 2.0 + TABLE

    x = jnp.ones((4, 4))
    print(step(x, jnp.zeros((2, 4))), scale(jnp.full((2000,), 3.0)).sum())
    """
)
# The user's own flags for the two-function run: a repeated field (the pass list), a plain
# one, and a dump filter; its debug_options file then shows all three kinds.
TWO_FUNCTIONS_FLAGS = (
    "--xla_disable_hlo_passes=algsimp,cse --xla_cpu_enable_fast_math=false "
    "--xla_dump_hlo_pass_re=^dce$"
)


def literal_to_array(lit: Any) -> np.ndarray:
    """Decode a ``LiteralProto`` that must hold an array (not a tuple)."""
    value = literal_to_numpy(lit)
    if isinstance(value, tuple):
        raise BugkitError(f"expected an array literal, got {shape_of(lit)}")
    return value


def clean_env(xla_flags: str | None = None) -> dict[str, str]:
    """This process's environment without the caller's JAX/XLA settings, on CPU. (``import
    jax`` here set TF_CPP_MIN_LOG_LEVEL=1, which would hide XLA's INFO lines from collect.)"""
    skip = ("JAX_", "XLA_", "LIBTPU_", "TPU_", "TF_CPP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["JAX_PLATFORMS"] = "cpu"
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    return env


@dataclass(frozen=True)
class Collected:
    """One ``xla-bugkit collect``: its exit status, its summary (stderr) and the bundle."""

    returncode: int
    stderr: str
    bundle: Path

    def manifest(self) -> dict:  # type: ignore[type-arg]
        with zipfile.ZipFile(self.bundle) as z:
            return json.loads(z.read("manifest.json"))  # type: ignore[no-any-return]

    def names(self) -> list[str]:
        with zipfile.ZipFile(self.bundle) as z:
            return z.namelist()

    def text(self, name: str) -> str:
        with zipfile.ZipFile(self.bundle) as z:
            return z.read(name).decode()

    def unpack(self, dest: Path) -> Path:
        with zipfile.ZipFile(self.bundle) as z:
            z.extractall(dest)
        return dest

    def recorded_inputs(self, label: str | None = None) -> list[np.ndarray]:
        """The arguments in a bundled snapshot: that of the module whose label ends with
        ``label``, or (None) the one repro.py runs its module on (SNAPSHOT)."""
        if label is None:
            found = re.search(r"^SNAPSHOT = HERE / '([^']+)'", self.text("repro.py"), re.M)
            assert found, "repro.py names no snapshot"
            member = found.group(1)
        else:
            entries = [m for m in self.manifest()["modules"] if m["label"].endswith(label)]
            (member,) = [m["files"]["snapshot"] for m in entries if "snapshot" in m["files"]]
        with zipfile.ZipFile(self.bundle) as z:
            data = z.read(member)
        snapshot = HloSnapshot()
        snapshot.ParseFromString(data)
        return [literal_to_array(a) for a in snapshot.arguments]


def run_collect(
    out: Path,
    argv: list[str],
    *extra: str,
    cwd: Path | None = None,
    xla_flags: str = "",
    env: Mapping[str, str] | None = None,
) -> Collected:
    """``XLA_FLAGS=xla_flags xla-bugkit collect -o OUT EXTRA... -- ARGV`` on the CPU, with
    ``env`` added to a clean environment."""
    marks.require_jax("xla-bugkit collect of a program")
    command = [XLA_BUGKIT, "collect", "-o", str(out), *extra, "--", *argv]
    full_env = {**clean_env(xla_flags or None), **(env or {})}
    done = subprocess.run(command, capture_output=True, text=True, env=full_env,
                          cwd=cwd, timeout=READY_TIMEOUT)  # fmt: skip
    return Collected(done.returncode, done.stderr, out)


def wait_for_file(
    path: Path,
    *,
    ended: Callable[[], bool] | None = None,
    timeout: float = READY_TIMEOUT,
) -> None:
    """Wait until a program has written ``path`` (it is where the test wants it, say inside
    XLA's execution); fail at once if it ``ended`` before that, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if ended is not None and ended():
            raise AssertionError(f"the program ended before it wrote {path}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {path} after {timeout:g} s")
        time.sleep(0.1)


def wait_for_child(path: Path, child: subprocess.Popen[str]) -> None:
    """``wait_for_file`` for a program started by ``child`` (collect, say)."""
    wait_for_file(path, ended=lambda: child.poll() is not None)


def stop_group_of(ready: Path, sig: signal.Signals = signal.SIGTERM) -> None:
    """Send ``sig`` to the process group of the program whose id ``ready`` holds."""
    os.killpg(os.getpgid(int(ready.read_text())), sig)


@dataclass(frozen=True)
class Variant:
    """One program run: the script, the user's XLA_FLAGS, and whether collect's dumps are on.

    ``stop_when_ready``: the script writes its process id to the file given as its argument
    once it is where it should be (tests/programs/hang.py: inside XLA's execution), and the
    run is stopped then, with SIGTERM to its process group.
    """

    script: str  # a file in tests/programs, or "two_functions"
    xla_flags: str | None = None
    timeout: float = 600.0  # only a broken run reaches it
    dumps: bool = True
    dump_subdir: str = "dumps"
    stop_when_ready: bool = False


VARIANTS: Mapping[str, Variant] = {
    # First: the hang holds a worker until it is inside XLA and stopped.
    "hang": Variant("hang.py", stop_when_ready=True),
    "wrong_result": Variant("wrong_result.py"),
    # A training loop whose own check finds jax#39103's wrong value, then trains on.
    "training_wrong": Variant("training_wrong.py"),
    "compile_crash": Variant("compile_crash.py"),
    "compile_crash_again": Variant("compile_crash.py"),
    "compile_error": Variant("compile_error.py"),
    "runtime_error": Variant("runtime_error.py"),
    "success": Variant("success.py"),
    "two_functions": Variant("two_functions", xla_flags=TWO_FUNCTIONS_FLAGS),
    # XLA must still find a dump dir whose path has a space in it.
    "space_in_dump_dir": Variant("success.py", dump_subdir="dump dir"),
    # An unknown LLVM option: XLA's backend exits the process with status 1.
    "llvm_option": Variant(
        "success.py", xla_flags="--xla_backend_extra_options=bogus_opt", dumps=False
    ),
}


@dataclass(frozen=True)
class ProgramRun:
    name: str
    completed: proc.Completed
    dump_dir: Path  # empty when the variant ran without dumps
    env: Mapping[str, str]

    @property
    def output(self) -> str:
        return self.completed.output

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "completed": asdict(self.completed),
                "dump_dir": str(self.dump_dir), "env": dict(self.env)}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProgramRun:
        completed = proc.Completed(**data["completed"])
        return cls(data["name"], completed, Path(data["dump_dir"]), data["env"])


def log_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment collect's classification relies on, without dumps."""
    return dict(base, JAX_LOG_COMPILES="1", JAX_TRACEBACK_FILTERING="off", PYTHONUNBUFFERED="1")


class ProgramRuns:
    """Runs every variant once per session, for every xdist worker (``shared.once``): two
    at a time in the background outside xdist (this machine has two cores), one per worker
    under it, each worker starting at a variant of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        two = root / "two_functions.py"
        if not two.exists():
            partial = two.with_suffix(f".{os.getpid()}")
            partial.write_text(TWO_FUNCTIONS, "utf-8")
            partial.replace(two)
        workers = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="program-run")
        names = list(VARIANTS)
        start = shared.worker_index() % len(names)
        self._runs: dict[str, Future[ProgramRun]] = {
            name: self._pool.submit(self._shared, name) for name in names[start:] + names[:start]
        }

    def _shared(self, name: str) -> ProgramRun:
        done = shared.once(self.root, name, lambda: self._run(name, VARIANTS[name]).to_json())
        return ProgramRun.from_json(done)

    def _run(self, name: str, variant: Variant) -> ProgramRun:
        if variant.script == "two_functions":
            script = self.root / "two_functions.py"
        else:
            script = PROGRAMS / variant.script
        dump_dir = self.root / name / variant.dump_subdir
        shutil.rmtree(dump_dir.parent, ignore_errors=True)  # a run that raised midway
        dump_dir.mkdir(parents=True)
        base = clean_env(variant.xla_flags)
        # With JAX's compile log on, as a user who turns it on has it: these runs test
        # what the output alone tells (collect's own runs leave the log off, and the hook
        # records the compilations).
        env = dict(rerun.child_env(base, dump_dir)[0], JAX_LOG_COMPILES="1")
        env = env if variant.dumps else log_env(base)
        argv = [sys.executable, str(script)]
        ended = threading.Event()
        if variant.stop_when_ready:
            ready = self.root / name / "ready"
            argv.append(str(ready))
            stopper = threading.Thread(target=self._stop_when_ready, args=(ready, ended))
            stopper.start()
        try:
            completed = proc.run(argv, env=env, cwd=self.root, timeout=variant.timeout)
        finally:
            ended.set()
        return ProgramRun(name, completed, dump_dir, env)

    @staticmethod
    def _stop_when_ready(ready: Path, ended: threading.Event) -> None:
        try:
            wait_for_file(ready, ended=ended.is_set)
        except AssertionError:
            return  # the run ended (or timed out) without getting there: its test says so
        stop_group_of(ready)

    def __getitem__(self, name: str) -> ProgramRun:
        return self._runs[name].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def hooked_env(work: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment collect gives a program: dumps into ``work/dump``, the start-up hook
    recording into ``work``."""
    env, _ = rerun.child_env(clean_env() if base is None else base, work / "dump",
                             work / evidence_files.PROCESSES)  # fmt: skip
    (work / "dump").mkdir(parents=True, exist_ok=True)
    return env


def run(argv: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end in ``env``, its output captured."""
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=READY_TIMEOUT)  # fmt: skip


# A program that saves jax arrays' shards with the start-up hook's own recorder and module,
# loaded by path as the hook's patch loads them, over 4 forced CPU devices: its ``body`` has
# ``folder``, ``recorder``, ``jax``, ``np``, ``Mesh``, ``NamedSharding`` and ``P``, and calls
# ``save(n, arrays)`` (or ``save(n, arrays, call)``: the module's execution, 1 by default).
_SAVES_SHARDS = """
import importlib.util, sys
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

folder, path = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("_xla_bugkit_recorder", path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
recorder = module.Recorder(folder)
recorder.open()
saver = recorder.load_sibling("shards")
save = lambda n, arrays, call=1: saver.save(recorder, n, arrays, "step", call)
"""


def save_shards(folder: Path, body: str, **env: str) -> None:
    """Run ``body`` (see ``_SAVES_SHARDS``) in a child with ``folder`` as the recorder's,
    ``env`` added to its environment."""
    from xla_bugkit.run.hook import recorder

    marks.require_jax("a jax program")
    program = _SAVES_SHARDS + textwrap.dedent(body) + '\nprint("saved")\n'
    argv = [sys.executable, "-c", program, str(folder), recorder.__file__]
    environment = {**clean_env("--xla_force_host_platform_device_count=4"), **env}
    done = run(argv, environment, folder)
    assert done.returncode == 0 and "saved" in done.stdout, done.stderr


def saved_shards(folder: Path, body: str, n: int) -> list[np.ndarray]:
    """What the hook saved of execution ``n`` as ``body`` (see ``_SAVES_SHARDS``) ran in a
    child with ``folder`` as the recorder's: the distinct shards, and last the layout."""
    save_shards(folder, body)
    return shards_file(folder, n)


def shards_file(folder: Path, n: int) -> list[np.ndarray]:
    """The arrays of the hook's shards file of execution ``n`` in ``folder``."""
    [file] = list(folder.glob(f"*.shards-{n}.npz"))
    with np.load(file) as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def run_record(
    output: str,
    failure: Failure,
    *,
    command: tuple[str, ...] = ("python", "x.py"),
    exit_status: int = 1,
    user_flags: tuple[str, ...] = (),
    log: Path = Path("run.log"),
    **fields: Any,
) -> RunRecord:
    """A run's record made by hand, for a test of what is read from one: ``output`` and its
    ``failure``, the user's XLA flags, and any other field of ``RunRecord``."""
    return RunRecord(
        command=command,
        exit_status=exit_status,
        timed_out=False,
        interrupted=False,
        duration=1.0,
        log=log,
        output=output,
        xla_flags=flags.MergedFlags(user_flags, user_flags, ()),
        failure=failure,
        **fields,
    )
