"""Shared, expensive fixtures: real jax programs, each run once per test session.

Every jax process costs seconds to start, so the programs that several test modules need
(tests/programs/*.py and a small two-function program) run once, two at a time, in the
background from the first test that asks for them; a test waits only for the run it reads
(``helpers.programs``).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.helpers import marks, shared
from tests.helpers.programs import ProgramRuns

# Started in the background by a shell without job control (`cmd &` in a script, under
# nohup), the suite inherits SIGINT ignored, and so would every process it starts: the tests
# that press Ctrl-C on collect would wait for a stop that never comes. Python's own handler
# here makes the processes the tests start take SIGINT's default again, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def program_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProgramRuns]:
    runs = ProgramRuns(shared.shared_folder(tmp_path_factory, "program_runs"))
    try:
        yield runs
    finally:
        runs.close()


# Fixtures that start jax processes: every test using one is in the jax tier, so the unit
# tier (-m "not jax and not slow") starts none without anyone having to remember a marker.
JAX_FIXTURES = frozenset(
    {"program_runs", "bundles", "shrink_bundles", "bundle", "dumps", "dump", "nan_dump",
     "scratch_dump", "hooked", "loop_runs", "hooked_program"}
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if JAX_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.jax)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test not marked as one that starts jax may not import it, nor start a real program
    through the helpers (``helpers.marks``)."""
    marks.running(item)
    finder = marks.guard(item)
    try:
        return (yield)
    finally:
        marks.unguard(finder)
        marks.running(None)


@pytest.fixture(autouse=True)
def _no_launcher_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test machine inside a cluster job (srun, mpirun, a TPU pod) would make each
    collect a part of that job, its bundle named for the part: the tests run outside one."""
    from xla_bugkit.collecting.job import LAUNCHERS

    for names in LAUNCHERS:
        for name in names:
            monkeypatch.delenv(name, raising=False)
