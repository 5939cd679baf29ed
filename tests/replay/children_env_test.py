"""What a replay child under another interpreter sees on its path: this package alone, never
the numpy or jaxlib built for this interpreter that may lie beside it."""

from __future__ import annotations

import os
from pathlib import Path

import xla_bugkit
from xla_bugkit.replay import children

PACKAGE = Path(xla_bugkit.__file__).resolve().parent


def test_this_interpreter_imports_the_package_from_where_it_lies() -> None:
    env = children.child_env((), "cpu")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(PACKAGE.parent)


def test_another_interpreter_sees_this_package_and_protobuf_alone(tmp_path: Path) -> None:
    release = tmp_path / "jaxlib-0.12.0-cp312"
    env = children.child_env((), "cpu", python="/opt/python3.12", release=release)
    first, own, *rest = env["PYTHONPATH"].split(os.pathsep)
    assert first == str(release)  # the release, then its numpy and ml_dtypes, come first
    assert os.listdir(own) == ["xla_bugkit"]
    assert (Path(own) / "xla_bugkit").resolve() == PACKAGE
    lent = rest[-1]
    assert os.listdir(lent) == ["google"]  # protobuf's abi3 wheels load on any Python 3
    assert str(PACKAGE.parent) not in env["PYTHONPATH"].split(os.pathsep)


def test_a_tpu_child_loads_the_libtpu_it_is_given_and_no_other_child_is_told(
    tmp_path: Path,
) -> None:
    library = tmp_path / "libtpu-0.0.43" / "libtpu" / "libtpu.so"
    tpu = children.child_env((), "tpu", compiler=library)
    assert tpu["TPU_LIBRARY_PATH"] == str(library)
    assert tpu["JAX_PLATFORMS"] == "tpu,cpu"
    cpu = children.child_env((), "cpu", compiler=library)
    assert cpu.get("TPU_LIBRARY_PATH") == os.environ.get("TPU_LIBRARY_PATH")
