"""A TPU bundle's bisect over libtpu releases, without a TPU: the releases listed, each
probe a real replay child given that release's libtpu.so, which cannot load here and so
could test nothing; and the refusal of the command itself off a TPU.

What a probe shows on the chip (a libtpu that loads and fails, or passes) is the ``tpu``
tier's (``tests/tpu/libtpu_bisect_test.py``)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from xla_bugkit import platforms
from xla_bugkit.bisect import libtpu as axis
from xla_bugkit.bisect.run import issue_section
from xla_bugkit.bisect.search import Seen
from xla_bugkit.bundle.manifest import open_bundle, pick_module
from xla_bugkit.cli.commands.bisect import render
from xla_bugkit.errors import NeedsDevice
from xla_bugkit.failure.classify import Failure
from xla_bugkit.releases import cache, libtpu
from xla_bugkit.replay import RunContext, replay_input
from xla_bugkit.ui import Ui

# Collected on a TPU v5e (jax 0.10.2, libtpu 0.0.42.1): a compile that needs more HBM than
# the chip has.
BUNDLE = Path(__file__).resolve().parents[1] / "tpu" / "recorded" / "hbm_oom.zip"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))


def not_loadable_wheels(folder: Path, *versions: str) -> Path:
    """Wheels laid out as libtpu's, whose libtpu.so is no shared library: jax's dlopen of it
    fails as it does for a file of the wrong kind."""
    folder.mkdir()
    tag = libtpu.python_tag()
    for version in versions:
        name = f"libtpu-{version}-{tag}-{tag}-manylinux_2_31_{libtpu.platform.machine()}.whl"
        with zipfile.ZipFile(folder / name, "w") as z:
            z.writestr("libtpu/__init__.py", "")
            z.writestr("libtpu/libtpu.so", b"not a shared library\n")
    return folder


def test_the_module_needs_a_tpu_for_its_bisect() -> None:
    if platforms.devices_here(platforms.TPU):
        pytest.skip("this machine has a TPU")
    with pytest.raises(NeedsDevice) as raised:
        axis.refuse_off_device("jit_f", platforms.TPU)
    assert str(raised.value) == (
        "jit_f was compiled for a TPU: bisect needs a TPU (it replays the module under each "
        "libtpu release on the chip); on a TPU machine: xla-bugkit bisect BUNDLE"
    )


@pytest.mark.jax
def test_a_libtpu_that_cannot_load_is_judged_cannot_test_not_good_or_bad(tmp_path: Path) -> None:
    wheels = not_loadable_wheels(tmp_path / "wheels", "0.0.40", "0.0.41", "0.0.42.1")
    said = io.StringIO()
    with open_bundle(BUNDLE, prefix="xla-bugkit-test-") as b:
        module = pick_module(b.manifest["modules"], None)
        inp = replay_input(module["label"], b.module_files(module), module["platform"])
        assert inp is not None and inp.platform == "tpu"
        result = axis.bisect_libtpu(
            inp,
            Failure.from_json(b.manifest["failure"]),
            RunContext.of_manifest(b.manifest),
            axis.LibtpuRange(wheels),
            reported=b.manifest["versions"]["libtpu"],
            timeout=120.0,
            ui=Ui(stream=said),
        )
    assert result.dist == "libtpu"
    assert result.versions == ("0.0.40", "0.0.41", "0.0.42.1")
    # Each tried in a real child: none could run the module, so none anchors the search.
    assert [p.version for p in result.probes] == ["0.0.40", "0.0.41", "0.0.42.1"]
    for p in result.probes:
        assert p.seen is Seen.UNTRIED
        assert p.detail.startswith(f"cannot test: libtpu {p.version} did not load under this")
        # jax's own words for a library it could not open, with the path it was given.
        assert "Unable to initialize backend 'tpu'" in p.detail
        assert f"Failed to open <cache>/releases/libtpu-{p.version}/libtpu/libtpu.so" in p.detail
        assert str(tmp_path) not in p.detail  # the user's cache folder is no bundle's business
    assert result.boundaries == ()
    assert result.summary == "no release could run the replay"
    first = said.getvalue().splitlines()[0]
    assert first.startswith("xla-bugkit: bisecting ") and "over libtpu 0.0.40 to 0.0.42.1" in first
    text = render(result)
    assert text.splitlines()[0].startswith("libtpu 0.0.40: not tried: cannot test:")
    assert "libtpu 0.0.42.1 (the reporter's): not tried" in text
    section = issue_section(result)
    assert section.startswith("#### Across libtpu releases")
    assert "| libtpu | replay | what it showed |" in section
    assert result.to_json()["dist"] == "libtpu"
