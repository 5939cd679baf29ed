"""jax's errors about the program's own use of it: real outputs of jaxlib 0.10.2 on the CPU,
each classified as the program's, and XLA's own exception types still XLA's."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.bundle.triage import triage
from xla_bugkit.failure.classify import Kind, classify
from xla_bugkit.failure.jax_use import misuse
from xla_bugkit.failure.pytraceback import XLA_EXCEPTION

DATA = Path(__file__).parent / "data" / "jax_use"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("checkify_check.txt", "a checkify.check of the program's own failed"),
        ("read_after_donation.txt", "the program read an array after donating it"),
        ("passed_after_donation.txt", "the program passed an array it had donated"),
    ],
)
def test_jaxs_errors_about_the_programs_use_of_it_are_the_programs(name: str, why: str) -> None:
    failure = classify((DATA / name).read_text(), exit_status=1)
    assert failure.kind is Kind.EXIT
    assert f", raised by jax: {why}" in failure.headline
    assert failure.status_code is None  # INVALID_ARGUMENT there is the runtime's refusal
    judged = triage(failure, [])
    assert not judged.xla, judged.reason


def test_a_tracer_error_stays_a_python_error_of_the_programs() -> None:
    failure = classify((DATA / "tracer_bool.txt").read_text(), exit_status=1)
    assert failure.kind is Kind.EXIT
    assert failure.exception == "jax.errors.TracerBoolConversionError"
    assert not triage(failure, []).xla


def test_the_hooks_own_wait_on_a_donated_buffer_is_a_misuse_never_xlas() -> None:
    line = "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer"  # noqa: E501
    assert misuse(line) is not None


@pytest.mark.parametrize(
    ("name", "xla"),
    [
        ("jax.errors.JaxRuntimeError", True),
        ("JaxRuntimeError", True),
        ("jaxlib.xla_extension.XlaRuntimeError", True),  # jaxlib before 0.5
        ("jaxlib._jax.XlaRuntimeError", True),
        ("jax._src.checkify.JaxRuntimeError", False),  # checkify's own class of that name
        ("my_package.errors.JaxRuntimeError", False),
    ],
)
def test_only_jax_and_jaxlibs_own_classes_are_xlas_exception(name: str, xla: bool) -> None:
    assert bool(XLA_EXCEPTION.search(name)) is xla


def test_an_error_xla_raised_is_no_misuse() -> None:
    line = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes."  # noqa: E501
    assert misuse(line) is None
