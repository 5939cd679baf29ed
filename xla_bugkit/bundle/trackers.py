"""The form ISSUE.md follows: the bug-report fields of the tracker it goes to.

jax-ml/jax's form has two sections, Description and System info (openxla/xla has no form
and takes the same body); tensorflow/tensorflow's form asks for versions, OS and CUDA field
by field, then "Current behavior?", "Standalone code to reproduce the issue" and "Relevant
log output"; pytorch/xla's template asks for "Bug", "To Reproduce", "Expected behavior" and
"Environment" (the XLA backend and the torch_xla version). Each field is filled from what
the bundle knows; what it cannot know (has the TensorFlow nightly been tried?) says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_bugkit import frameworks, platforms
from xla_bugkit.bundle import envinfo
from xla_bugkit.failure.classify import Failure
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.replay import reproduced_under_jaxlib
from xla_bugkit.verdict import Verdict

JAX_FORM = "issue.md"
_FORMS = {
    frameworks.Framework.TENSORFLOW.issue_repo: "issue-tensorflow.md",
    frameworks.Framework.PYTORCH_XLA.issue_repo: "issue-pytorch-xla.md",
}


def destination(
    framework: frameworks.Framework | None, verdicts: Sequence[Verdict], repo: str | None
) -> str:
    """Where the issue goes: the user's ``repo``, else the framework's tracker (openxla/xla
    when a plain jaxlib replay of another framework's module shows the bug)."""
    if repo:
        return repo
    reproduced = reproduced_under_jaxlib(verdicts)
    return frameworks.issue_repo(framework, reproduced_under_jaxlib=reproduced)


def form(repo: str) -> str:
    """The template of the tracker ``repo`` ("owner/name"); jax's form for any other."""
    return _FORMS.get(repo.lower(), JAX_FORM)


def fields(
    env: envinfo.EnvReport,
    failure: Failure,
    framework: frameworks.FrameworkInfo | None,
    platform: str | None,
) -> dict[str, str]:
    """The values the trackers' forms ask for, as plain text."""
    uname = dict(env.uname)
    gpu = "see System info (nvidia-smi)" if env.nvidia_smi else "none (CPU)"
    return {
        "framework_version": _version(framework),
        "os": " ".join(v for v in (uname.get("system"), uname.get("release")) if v) or "?",
        "python_version": env.python.split(" ", 1)[0],
        "cuda": "see System info (nvidia-smi)" if env.nvidia_smi else "n/a (CPU)",
        "gpu": gpu,
        "backend": _backend(platform),
        "expected": KINDS[failure.kind].expected,
    }


def _version(framework: frameworks.FrameworkInfo | None) -> str:
    if framework is None or not framework.version:
        return "unknown"
    revision = f" ({framework.revision})" if framework.revision else ""
    if framework.version_from == frameworks.HERE:
        revision += " (as installed where xla-bugkit ran; the program's was not recorded)"
    return f"{framework.version}{revision}"


def _backend(platform: str | None) -> str:
    """XLA's platform of the module as the form names backends: CPU, CUDA, TPU."""
    if not platform:
        return "unknown"
    name = platform.lower()
    if name.endswith("_gpu"):
        name = platforms.GPU.name  # XLA's dump name for its target: "sm_9.0_gpu"
    found = platforms.find(name)
    return found.label if found is not None else name.upper()
