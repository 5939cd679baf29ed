"""What is installed here, by distribution: the versions the environment report lists, the
accelerator plugins a device probe would contend with, and how to install xla-bugkit."""

from __future__ import annotations

import glob
import json
import os
import sys
from importlib import metadata

NOT_INSTALLED = "not installed"

# Shown in this order; jax plugins only when installed, since most users have none.
CORE_DISTS = ("jax", "jaxlib", "numpy", "ml_dtypes", "protobuf", "py7zr")
PLUGIN_DISTS = (
    "jax-cuda12-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "jax-rocm7-plugin",
    "jax-rocm7-pjrt",
    "libtpu",
)
# Backends a probe could hold while the program runs (a TPU opens in one process only; a
# GPU probe takes device memory): with any of them installed, the probe waits for the run.
ACCELERATOR_DISTS = (*PLUGIN_DISTS, "jax-metal", "jax-tpu", "tensorflow", "torch-xla")
# The other frameworks, by the name the start-up hook records each under: listed as the
# program imported them (only those it did), or, without its record, as installed here.
FRAMEWORK_DISTS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"),
    "torch": ("torch",),
    "torch_xla": ("torch-xla", "torch_xla"),
}


def nvidia_dists() -> list[tuple[str, str]]:
    """The NVIDIA libraries installed as wheels (cuBLAS, cuDNN, NCCL, ptxas' nvcc, ...), by
    name: some "XLA bugs" are a library release's bug."""
    found: dict[str, str] = {}
    # By the names of their dist-info folders: reading every distribution's METADATA to
    # learn its name took 30 ms of collect's time after the program.
    for folder in sys.path:
        for info in glob.glob(os.path.join(glob.escape(folder or "."), "nvidia[-_]*.dist-info")):
            name, _, version = os.path.basename(info).removesuffix(".dist-info").partition("-")
            found.setdefault(name.lower().replace("_", "-"), version)
    return sorted(found.items())


# The Project-URL labels that name a repository pip can install from (not a homepage).
_SOURCE_LABELS = ("source", "repository", "source code", "code")


# Installed from a folder (a clone, as the README installs it): no place a maintainer can
# reach is known, and a package index may not have this version. The command names the
# clone for them to make, not a pinned version pip may not find.
FROM_CLONE = "python -m pip install path/to/a/clone/of/xla-bugkit"


def install_command() -> str:
    """How a maintainer installs the xla-bugkit that made a bundle: from the source its
    metadata names (``[project.urls]``), or from the repository it was installed from, with
    pipx; from a clone of its repository otherwise (``FROM_CLONE``)."""
    try:
        dist = metadata.distribution("xla-bugkit")
    except metadata.PackageNotFoundError:
        return "pip install xla-bugkit"
    for entry in dist.metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() in _SOURCE_LABELS and url.strip().startswith("https://"):
            return f"pipx install git+{url.strip()}"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url, vcs = str(direct.get("url", "")), direct.get("vcs_info")
    if url.startswith("https://") and isinstance(vcs, dict) and vcs.get("vcs") == "git":
        commit = str(vcs.get("commit_id", ""))
        return f"pipx install git+{url}" + (f"@{commit}" if commit else "")
    return FROM_CLONE


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED
