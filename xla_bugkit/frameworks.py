"""Which framework handed XLA its modules (JAX, TensorFlow, PyTorch/XLA): how it is told,
its versions, the names of its functions, where its issues go. What it changes in the
rerun's environment is ``run.adapt``'s; what the report says of it, ``bundle.framework_text``'s.

XLA's dump flags work the same under all three, but each names its modules its own way
(TensorFlow ``a_inference_f_13__XlaMustCompile_true_...``, Keras
``a_inference_one_step_on_data_240__.5``, auto-clustering ``cluster_0__XlaCompiledKernel_true...``,
PyTorch/XLA ``SyncTensorsGraph.N``) and each fails differently with the flags JAX takes well:
TensorFlow's ``tf.function(jit_compile=True)`` segfaults at its first run with
``--xla_dump_hlo_snapshots``. When unsure, everything stays as it is for JAX.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NotRequired, TypedDict


class FrameworkEntry(TypedDict):
    """The manifest's ``framework`` record."""

    name: str  # a ``Framework`` value
    version: str | None
    # The framework's own git revision, where it says (torch_xla: its pytorch/xla commit,
    # ``__xla_gitrev__``; the OpenXLA commit it builds is not in the wheel).
    revision: str | None
    detected_from: str
    # Whose the version is: ``PROGRAM`` or ``HERE`` (absent in older bundles).
    version_from: NotRequired[str]


# Where a framework's version was read: the program's own interpreter (the start-up hook's
# record), or, where it recorded none, xla-bugkit's environment.
PROGRAM, HERE = "the program", "xla-bugkit's environment"


class Framework(StrEnum):
    """The values appear in manifests."""

    JAX = "jax"
    TENSORFLOW = "tensorflow"
    PYTORCH_XLA = "pytorch/xla"

    @property
    def display(self) -> str:
        return _TITLES[self]

    @property
    def issue_repo(self) -> str:
        """The tracker for bugs seen through this framework."""
        return _REPOS[self]


_TITLES = {
    Framework.JAX: "JAX",
    Framework.TENSORFLOW: "TensorFlow",
    Framework.PYTORCH_XLA: "PyTorch/XLA",
}
_REPOS = {
    Framework.JAX: "jax-ml/jax",
    Framework.TENSORFLOW: "tensorflow/tensorflow",
    Framework.PYTORCH_XLA: "pytorch/xla",
}
XLA_REPO = "openxla/xla"  # a bug a plain jaxlib replay shows is XLA's, whoever found it

_IMPORT = re.compile(
    r"^\s*(?:import|from)\s+(?P<mod>jax|jaxlib|flax|tensorflow|keras|tf_keras|torch_xla)\b", re.M
)
_SOURCE_LIMIT = 1 << 20  # a script's imports are at its top; a megabyte is plenty

_TF_MODULE = re.compile(r"^(?:a_inference_\w+|cluster_\d+(?:__\w+)?)(?:\.\d+)?$|__XlaMustCompile_")
_TORCH_MODULE = re.compile(r"^SyncTensorsGraph\.\d+$")
_JAX_MODULE = re.compile(r"^(?:jit|pmap|xla_pmap)_")

_TF_OUTPUT = re.compile(
    r"\[Op:__inference_|xla_ops\.cc:\d+|tensorflow\.python\.framework\.errors_impl|"
    r"XlaLocalLaunchOpBase|^\s*File \"[^\"]*/tensorflow/",
    re.M,
)
_TORCH_OUTPUT = re.compile(r"torch_xla|SyncTensorsGraph|PT_XLA_DEBUG|xla_graph_executor")
_JAX_OUTPUT = re.compile(r"JaxRuntimeError|Compiling jit\(|^\s*File \"[^\"]*/jax/_src/", re.M)


@dataclass(frozen=True)
class Detection:
    framework: Framework
    source: str  # what told: "dump module names", "the program's output", "the command"


_RELEASE_NUMBER = re.compile(r"\d+(?:\.\d+)+")


def is_release_number(text: str) -> bool:
    """Whether ``text`` is a plain release number ("0.8.1", "0.9.0.1") and nothing else: one
    that sorts by its numbers and is safe to name in a command."""
    return _RELEASE_NUMBER.fullmatch(text) is not None


def from_command(command: Sequence[str], cwd: Path | None = None) -> Framework | None:
    """The framework the command's Python script imports: known before the run, cheaply.

    A script that imports JAX is JAX's even when it imports TensorFlow too (for data,
    say); ``None`` when there is no script to read or it imports none of them.
    """
    source = _script_source(command, cwd or Path.cwd())
    return from_imports(source) if source is not None else None


def from_imports(source: str) -> Framework | None:
    """The framework a Python source imports (JAX wins a tie: the safe default)."""
    found = {m.group("mod") for m in _IMPORT.finditer(source)}
    if found & {"jax", "jaxlib", "flax"}:
        return Framework.JAX
    if "torch_xla" in found:
        return Framework.PYTORCH_XLA
    if found & {"tensorflow", "tf_keras"}:
        return Framework.TENSORFLOW
    return None


def _script_source(command: Sequence[str], cwd: Path) -> str | None:
    """The code ``python [options] script.py ...`` or ``python -c CODE`` runs."""
    args = list(command)
    if args and Path(args[0]).name.startswith("python"):
        args = args[1:]
        while args and args[0].startswith("-") and args[0] not in ("-c", "-m"):
            # Options that take a value as the next word.
            args = args[2:] if args[0] in ("-X", "-W") else args[1:]
        if args[:1] == ["-c"]:
            return args[1] if len(args) > 1 else None
    if not args or not args[0].endswith(".py"):
        return None
    path = Path(args[0]) if Path(args[0]).is_absolute() else cwd / args[0]
    try:
        with path.open("rb") as f:
            return f.read(_SOURCE_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


def from_module_names(names: Iterable[str]) -> Framework | None:
    """The framework whose naming the dumped modules follow; JAX only when nothing else's is
    there (a TensorFlow program run under a JAX-using harness dumps both)."""
    names = list(names)
    if any(_TORCH_MODULE.match(n) for n in names):
        return Framework.PYTORCH_XLA
    if any(_TF_MODULE.search(n) for n in names):
        return Framework.TENSORFLOW
    if any(_JAX_MODULE.match(n) for n in names):
        return Framework.JAX
    return None


def from_output(output: str) -> Framework | None:
    if _TORCH_OUTPUT.search(output):
        return Framework.PYTORCH_XLA
    if _TF_OUTPUT.search(output):
        return Framework.TENSORFLOW
    if _JAX_OUTPUT.search(output):
        return Framework.JAX
    return None


def detect(
    command: Sequence[str], output: str, module_names: Iterable[str], cwd: Path | None = None
) -> Detection | None:
    """The framework of a finished run: the dumped names say most, then the output, then
    the script's imports."""
    found = from_module_names(module_names)
    if found is not None:
        return Detection(found, "dump module names")
    found = from_output(output)
    if found is not None:
        return Detection(found, "the program's output")
    found = from_command(command, cwd)
    return Detection(found, "the script's imports") if found is not None else None


# The module whose ``__version__`` the start-up hook records for each (``hook.recorder``).
_MODULES = {
    Framework.JAX: "jaxlib",
    Framework.TENSORFLOW: "tensorflow",
    Framework.PYTORCH_XLA: "torch_xla",
}
_DISTS = {
    Framework.JAX: ("jaxlib",),
    Framework.TENSORFLOW: ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"),
    Framework.PYTORCH_XLA: ("torch-xla", "torch_xla"),
}
# Files that hold the revision, read as bytes: importing TensorFlow or torch_xla takes
# seconds and may start a backend. TensorFlow keeps its git version only in a compiled
# module ("v2.21.0-rc1-5-ga481b10260d"); its XLA is the one that commit pins.
_REVISION_FILES: dict[Framework, tuple[str, re.Pattern[bytes]]] = {
    Framework.JAX: (
        "jaxlib/version.py",
        re.compile(rb"^_git_hash\s*(?::\s*str\s*)?=\s*['\"](\w+)", re.M),
    ),
    Framework.PYTORCH_XLA: (
        "torch_xla/version.py",
        re.compile(rb"^__xla_gitrev__\s*=\s*['\"](\w+)", re.M),
    ),
    Framework.TENSORFLOW: (
        "tensorflow/python/client/_pywrap_tf_session.so",
        re.compile(rb"\bv\d+\.\d+\.\d+(?:-rc\d+)?-\d+-g[0-9a-f]{7,40}\b"),
    ),
}
_REVISION_READ_LIMIT = 16 << 20


@dataclass(frozen=True)
class FrameworkInfo:
    """What the manifest's ``framework`` record holds."""

    name: Framework
    version: str | None  # the program's, else the installed distribution's version
    revision: str | None  # its own git revision (torch_xla: the pytorch/xla commit)
    detected_from: str
    version_from: str = ""  # PROGRAM or HERE; "" for no version, or an older bundle's

    def to_json(self) -> FrameworkEntry:
        entry: FrameworkEntry = {
            "name": self.name.value,
            "version": self.version,
            "revision": self.revision,
            "detected_from": self.detected_from,
        }
        if self.version_from:
            entry["version_from"] = self.version_from
        return entry

    @property
    def describe(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"{self.name.display}{version}"


def info(found: Detection, recorded: Mapping[str, str] | None = None) -> FrameworkInfo:
    """The framework's version as the program's own interpreter imported it (``recorded``:
    the start-up hook's record of it), else as installed where xla-bugkit runs, which may be
    another environment (pipx, a venv of its own), and says so (``version_from``). The
    revision is read from the installed files, so only when they are of that version."""
    from importlib import metadata  # its import costs what collect's start should not

    dist = _installed(_DISTS[found.framework])
    here = metadata.version(dist) if dist else None
    version = (recorded or {}).get(_MODULES[found.framework]) or None
    source = PROGRAM if version else HERE if here else ""
    version = version or here
    revision = _revision(found.framework, dist) if dist and here == version else None
    return FrameworkInfo(found.framework, version, revision, found.source, source)


def installed_version(framework: Framework) -> str | None:
    """The version of ``framework``'s distribution installed here; None when there is none."""
    from importlib import metadata

    dist = _installed(_DISTS[framework])
    return metadata.version(dist) if dist else None


def _installed(names: Sequence[str]) -> str | None:
    from importlib import metadata

    for name in names:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    return None


def _revision(framework: Framework, dist: str) -> str | None:
    from importlib import metadata

    relative, pattern = _REVISION_FILES[framework]
    try:
        path = Path(str(metadata.distribution(dist).locate_file(relative)))
        with path.open("rb") as f:
            data = f.read(_REVISION_READ_LIMIT)
    except (OSError, metadata.PackageNotFoundError):
        return None
    found = pattern.search(data)
    if found is None:
        return None
    return (found.group(1) if pattern.groups else found.group(0)).decode("ascii", "replace")


def issue_repo(framework: Framework | None, *, reproduced_under_jaxlib: bool) -> str:
    """Where a report goes: the framework's tracker, or openxla/xla when a plain jaxlib
    replay of another framework's module shows the bug (it is XLA's, not the framework's)."""
    if framework in (Framework.TENSORFLOW, Framework.PYTORCH_XLA) and reproduced_under_jaxlib:
        return XLA_REPO
    return (framework or Framework.JAX).issue_repo


def runs_function(module_name: str, function: str) -> bool:
    """Whether the dumped module is TensorFlow's ``function``: ``__inference_f_13`` (the
    error's ``[Op:__inference_f_13]``) is dumped as ``a_inference_f_13__XlaMustCompile_...``;
    ``__inference_f_1`` must not match ``a_inference_f_13``."""
    if not function.startswith("__inference_"):
        return False
    return re.match(rf"a{re.escape(function[1:])}(?:__|\.|$)", module_name) is not None


def name_is_shared(module_name: str) -> bool:
    """PyTorch/XLA gives different graphs one name (``SyncTensorsGraph.8`` thrice in a run):
    such a name, seen in the output, tells nothing about which module; only ids do."""
    return _TORCH_MODULE.match(module_name) is not None


def of_record(record: FrameworkEntry | None) -> Framework | None:
    """The framework of a manifest's record; None for none, or one a newer version knows."""
    try:
        return Framework(record["name"]) if record is not None else None
    except ValueError:
        return None
