"""ISSUE.md in the shape of the tracker it goes to: jax-ml/jax's form (also openxla/xla's),
tensorflow/tensorflow's and pytorch/xla's, each field filled from what the bundle knows."""

from __future__ import annotations

import re

import pytest

from tests.bundle.issue_test import _ctx
from xla_bugkit import frameworks
from xla_bugkit.bundle import trackers
from xla_bugkit.bundle.envinfo import collect_env
from xla_bugkit.bundle.issue import render_issue
from xla_bugkit.failure.classify import Kind, classify
from xla_bugkit.redact import Redactor

WRONG = classify("eval: max |jit - numpy| = 0.57 at [32768]: MISMATCH\n", exit_status=1)
CRASH = classify(
    "F1202 09:49:08.829582  1892 ir_array.cc:515] Check failed: index.ShapeIsCompatible(shape_)\n",
    exit_status=-6,
)


def _framework(name: frameworks.Framework, version: str, revision: str) -> frameworks.FrameworkInfo:
    return frameworks.FrameworkInfo(name, version, revision, "the command")


@pytest.mark.parametrize(
    ("repo", "form"),
    [
        ("jax-ml/jax", "issue.md"),
        ("openxla/xla", "issue.md"),  # no form of its own: jax's body reads well there
        ("tensorflow/tensorflow", "issue-tensorflow.md"),
        ("PyTorch/XLA", "issue-pytorch-xla.md"),
        ("me/my-fork", "issue.md"),
    ],
)
def test_each_tracker_gets_its_own_form(repo: str, form: str) -> None:
    assert trackers.form(repo) == form


def test_tensorflows_form_fields_in_its_order() -> None:
    env = collect_env(Redactor())
    tf = _framework(frameworks.Framework.TENSORFLOW, "2.21.0", "v2.21.0-rc1-5-ga481b10260d")
    fields = trackers.fields(env, CRASH, tf, "cpu")
    body = render_issue(_ctx(form=trackers.form("tensorflow/tensorflow"), fields=fields))
    labels = re.findall(r"^\*\*([^*]+?)[:?]\*\*", body, re.M)
    assert labels[:11] == [
        "Issue type", "Have you reproduced the bug with TensorFlow Nightly", "Source",
        "TensorFlow version", "Custom code", "OS platform and distribution", "Mobile device",
        "Python version", "Bazel version", "GCC/compiler version", "CUDA/cuDNN version",
    ]  # fmt: skip
    assert "**TensorFlow version:** 2.21.0 (v2.21.0-rc1-5-ga481b10260d)" in body
    assert f"**Python version:** {env.python.split()[0]}" in body
    assert "**CUDA/cuDNN version:** n/a (CPU)" in body or env.nvidia_smi
    headings = re.findall(r"^### .*$", body, re.M)
    assert headings == [
        "### Current behavior?",
        "### Standalone code to reproduce the issue",
        "### Relevant log output",
    ]
    assert "XLA compiles the module without aborting." not in body  # a run-time crash
    assert "The program runs to the end without XLA crashing." in body
    assert not re.search(r"\$[a-z_]+", body)  # every field of the form was filled


def test_pytorch_xlas_template_sections_and_environment() -> None:
    env = collect_env(Redactor())
    ptxla = _framework(frameworks.Framework.PYTORCH_XLA, "2.9.0", "0123abcd")
    fields = trackers.fields(env, WRONG, ptxla, "cpu")
    body = render_issue(_ctx(form=trackers.form("pytorch/xla"), fields=fields))
    assert re.findall(r"^## .*$", body, re.M) == [
        "## 🐛 Bug", "## To Reproduce", "## Expected behavior", "## Environment",
        "## Additional context",
    ]  # fmt: skip
    assert " - Reproducible on XLA backend [CPU/TPU/CUDA]: CPU" in body
    assert " - torch_xla version: 2.9.0 (0123abcd)" in body
    assert WRONG.kind is Kind.WRONG_RESULT
    expected = body.split("## Expected behavior", 1)[1].split("##", 1)[0]
    assert "equals the reference" in expected
    # What jax's form shows is all there too.
    assert "#### What the bundle holds" in body and "#### Replay" in body
    assert "xla-bugkit verify bundle.zip" in body


def test_a_module_on_a_gpu_is_a_cuda_backend() -> None:
    env = collect_env(Redactor())
    assert trackers.fields(env, CRASH, None, "sm_9.0_gpu")["backend"] == "CUDA"
    assert trackers.fields(env, CRASH, None, None)["framework_version"] == "unknown"
