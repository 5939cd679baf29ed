"""xla-bugkit's start-up hook, put first on PYTHONPATH by ``xla-bugkit collect``.

It runs the ``sitecustomize`` it shadows (if any) and, only while collect's variable is
set, watches for the import of jax, TensorFlow and torch_xla: a process that imports none
pays for one cheap check per import and nothing else. Once one is imported it loads the recorder
from the folder above by file path (never through ``sys.path``, which stays the program's). Nothing
here may raise into the program or change what it does.
"""

import os
import sys

_HOOK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The modules whose import starts the recorder, and the recorder function each calls.
_WATCHED = {
    "jax": "jax_imported",
    "tensorflow": "tensorflow_imported",
    "torch_xla": "torch_xla_imported",
}


def _start_recorder(started: str = "jax_imported") -> None:
    module = sys.modules.get("_xla_bugkit_recorder")
    if module is None:
        import importlib.util

        path = os.path.join(_HOOK, "recorder.py")
        spec = importlib.util.spec_from_file_location("_xla_bugkit_recorder", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    getattr(module, started)()


class _ImportWatcher:
    """A meta-path finder that notices the import of a watched module: it hands the import
    system the module's own spec, whose loader then starts the recorder once the module has
    finished executing. It leaves ``sys.meta_path`` once it has seen them all."""

    def __init__(self, names: list[str]) -> None:
        self.pending = set(names)

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name not in self.pending:
            return None
        try:
            self.pending.discard(name)
            if not self.pending:
                sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)  # this finder no longer answers for it
            if spec is None or spec.loader is None:
                return None
            _run_after(spec.loader, _WATCHED[name])
            return spec
        except Exception:  # the import then goes on as if the hook were not there
            return None


def _run_after(loader, started) -> None:  # type: ignore[no-untyped-def]
    """This loader instance (the watched module's alone) starts the recorder after
    executing the module."""
    original = loader.exec_module

    def exec_module(module) -> None:  # type: ignore[no-untyped-def]
        original(module)
        try:
            del loader.exec_module  # back to the class's own method
            _start_recorder(started)
        except Exception:  # the program must run as it would without the hook
            pass

    loader.exec_module = exec_module


def _chain_shadowed() -> None:
    """Run the sitecustomize that would have been imported without this folder."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _log_as_bare_when_captured() -> None:
    """collect's XLA log settings make XLA write a line to stderr for each file it dumps:
    collect reads those from the output it gave the program, and hides them there. A
    process whose stderr its parent took for itself (``subprocess.run(capture_output=True)``,
    a redirect to a file) gets the user's own settings back before XLA reads them, so that
    what its parent reads is what it would read bare. The process collect started, and one
    that writes where its parent does, keep collect's."""
    before = os.environ.get("XLA_BUGKIT_LOG_BEFORE")
    parent = os.getppid()
    if not before or str(parent) == os.environ.get("XLA_BUGKIT_COLLECT_PID"):
        return
    try:
        mine = os.fstat(2)
        theirs = [os.stat(f"/proc/{parent}/fd/{fd}") for fd in (1, 2)]
    except OSError:  # no /proc (not Linux), or the parent is gone: left as it is
        return
    if any((mine.st_dev, mine.st_ino) == (t.st_dev, t.st_ino) for t in theirs):
        return
    import json

    for name, value in json.loads(before).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


if os.environ.get("XLA_BUGKIT_PROCESSES"):
    try:  # noqa: SIM105 (contextlib is not imported at start-up: this costs nothing)
        _log_as_bare_when_captured()
    except Exception:  # the program must run as it would without the hook
        pass
    for _name in [n for n in _WATCHED if n in sys.modules]:
        _start_recorder(_WATCHED[_name])
    _unseen = [n for n in _WATCHED if n not in sys.modules]
    if _unseen:
        sys.meta_path.insert(0, _ImportWatcher(_unseen))
try:
    _chain_shadowed()
except Exception as e:
    # Its errors are the program's, reported as site reports them without the hook.
    print(
        f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}",
        file=sys.stderr,
    )
