"""The names of a bundle's members: the one place that spells them.

The manifest lists every member by these names; readers (``show``, ``verify``, ``repack``,
``shrink``) find them here, never in the module that writes them.
"""

from __future__ import annotations

MANIFEST = "manifest.json"
ISSUE = "ISSUE.md"  # the issue body, for people to read and edit
LOG = "log.txt"  # the run's output, its tail
OTHER_MODULES = "other-modules.txt"  # the modules the run compiled that were not chosen
ENVIRONMENT = "environment.txt"  # the environment report
REPRO = "repro.py"  # replays the failure with jax, jaxlib and numpy alone
INPUTS = "inputs.npz"  # the arguments repro.py runs the module on
EXPECTED = "expected.npz"  # the reference result repro.py compares with
MODULES = "modules"  # a folder per chosen module: modules/<label>/
# A job's part: its process's shards of each call over several processes' devices, which
# merge stitches into the job's inputs (``run.shards``).
SHARDS = "shards"
SHRUNK = "shrunk"  # the shrunk module's folder, in a bundle that shrink wrote
BISECT = "bisect.json"  # the releases a bisect tried and what each showed

# Text written for people, which the reporter may well edit before filing (the ISSUE.md
# template asks for it). No replay reads them: an edit is reported, not refused.
EDITABLE = frozenset({ISSUE, LOG, OTHER_MODULES})


def module_member(label: str, name: str) -> str:
    """The member name of a module's file ``name`` (a sub-path for a PJRT folder's files)."""
    return f"{MODULES}/{label}/{name}"
