"""collect's replays made by the program's own process, held at its main module's end,
before it tears itself down: where opening the device costs seconds and one process at a
time may hold it (a TPU), the program already holds it, and no replay child need open it.

At the main module's end the run's record is not final: the program's teardown may still
print, or change its exit status. So the replay stage runs there on the record so far,
only to make its replays (``replay.children.Ahead``); the stages after the run then run
as always on the final record, and a replay asked exactly as one made ahead (the same
module, inputs, flags and environment) is taken from it rather than made again. A replay
the final record does not ask for is unused; one it asks for that was not made ahead runs
in a child, as always. Verdicts are the judge's, from the final record, either way.

Only replays under the run's own flags are served there (the program's process-wide
XLA_FLAGS are the run's): the replay without them (``own_flags``) and the wrong value's
search keep their children. A served replay that crashes or hangs the program is made
again in a fresh child (``Spares``); the run's record then shows how the program ended.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import platforms
from xla_bugkit.collecting import workdir
from xla_bugkit.run.held import Held
from xla_bugkit.ui import Ui

if TYPE_CHECKING:
    from xla_bugkit.choose.dumps import DumpIndex
    from xla_bugkit.choose.selection import Selection
    from xla_bugkit.collecting.options import CollectOptions
    from xla_bugkit.failure.classify import Failure
    from xla_bugkit.run.record import RunRecord
    from xla_bugkit.verdict import Verdict

# What the stages after the run import (the replays, numpy among them) is imported only
# where the switch is on: collect starts the program before it imports them (``warm``).

# "costly": on the platforms whose row says opening them is costly (``costly_start``: a
# TPU, a GPU); "1": on every platform (the tests force it so on the CPU); "0": on none.
# Unset: "costly" on a machine that has such a chip on its PCI bus (a TPU: measured on a v5e,
# benchmarks/TPU.md), "0" elsewhere.
IN_PROGRAM = "XLA_BUGKIT_IN_PROGRAM"
# Seconds of the run's timeout kept for the program's own teardown (a TPU's: about 6 s),
# and the least a replay made here is given.
LEFT_FOR_ITS_EXIT = 30.0
MIN_REPLAY = 10.0


def _mode() -> str:
    """``IN_PROGRAM``'s value, or what its absence means on this machine."""
    said = os.environ.get(IN_PROGRAM, "")
    if said:
        return said
    here = (platforms.devices_here(p) for p in platforms.PLATFORMS if p.costly_start)
    return "costly" if any(here) else "0"


def asked() -> bool:
    """Whether the program is asked, before it starts, to serve replays at its end."""
    return _mode() in ("1", "costly")


def held(work: Path) -> tuple[Held | None, dict[str, str]]:
    """Where asked, the FIFOs the program is asked over, and what its environment needs."""
    if not asked():
        return None, {}
    from xla_bugkit.replay.protocol import ENDED

    fifos = Held(work, ENDED)
    return fifos, fifos.env(_PACKAGE_PARENT)


# Where the program imports the replay server from: the folder this package is in.
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def replays_ahead(work: Path) -> Iterator[None]:
    """The replays the program makes at its main module's end are kept for the stages
    after the run while the block runs (``replay.Ahead``)."""
    if not asked():
        yield
        return
    from xla_bugkit.replay import Ahead, made_ahead

    folder = work / workdir.AHEAD
    folder.mkdir(exist_ok=True)
    with made_ahead(Ahead(folder)):
        yield


def serves(platform: str) -> bool:
    """Whether replays of ``platform``'s modules are served by the program."""
    said = _mode()
    found = platforms.find(platform)
    return said == "1" or (said == "costly" and found is not None and found.costly_start)


def replay_ahead(
    work: Path,
    held: Held,
    pid: int,
    so_far: Callable[[], RunRecord],
    options: CollectOptions,
    deadline: float | None,
) -> bool:
    """The replay stage's replays of the run (its record at the main module's end), made by
    the program ``pid``, ``held`` there, each within the run's ``deadline``; then the
    program goes on to its exit. Whether a replay ended the program. Nothing here is said
    to the user: the stages after the run say what they find."""
    try:
        if held.open(pid) and options.replay and _servable_failure((run := so_far()).failure):
            with Ui(verbosity=-1).timed("ahead"):
                _replay_stage(work, held, run, options, deadline)
    finally:
        held.let_go()
    return held.ended_it


def _servable_failure(failure: Failure) -> bool:
    """A failure whose replays the program's own process may make. Not one of memory at run
    time (a device or host out of it, RESOURCE_EXHAUSTED, an allocation): the program's
    arrays still fill the process's memory, so a replay there runs out as the run did where
    a process of its own would not (a TPU's HBM run-time out-of-memory beside the program's
    12 GiB). A compile's is served: the compiler weighs the module against the chip's whole
    memory ("exceeds available HBM (15.75G)"), not against what the program left free."""
    return failure.kind.is_failure and not failure.out_of_memory_running


def _replay_stage(
    work: Path, held: Held, run: RunRecord, options: CollectOptions, deadline: float | None
) -> None:
    """The replays the stages after the run would make, made here: for a wrong result the
    search's first, then the replay stage's and the replay without the run's own flags."""
    from xla_bugkit.collecting.replays import Replaying, replay_stage
    from xla_bugkit.collecting.stages import (
        choose,
        index_dumps,
        search_wrong_value,
        write_recorded_inputs,
    )
    from xla_bugkit.replay import Spares, differential
    from xla_bugkit.run import processes

    quiet = Ui(verbosity=-1, stream=io.StringIO())
    dump_dir = processes.dump_folder(work / workdir.DUMP, run.culprit)
    # The run's inputs as the stages after the run write them (they keep these, and say
    # what cannot serve): the replays are asked on the same files.
    write_recorded_inputs(work, dump_dir, run)
    found = index_dumps(dump_dir, run)
    selection = choose(found.index, run, options, run.culprit_evidence)
    platform = _platform(found.index, selection)
    if platform is None or not serves(platform):
        return
    replaying = Replaying.of_run(run, options)
    budget = options.budget
    if deadline is not None:
        # The run's timeout counts the time held: every replay ends well before it, or is
        # not made here (the stages after the run make it, in a child).
        left = deadline - time.monotonic() - LEFT_FOR_ITS_EXIT
        if left < MIN_REPLAY:
            return
        timeout = min(replaying.options.timeout, left)
        replaying = replace(replaying, options=replace(replaying.options, timeout=timeout))
        budget = min(budget, left)
    from xla_bugkit.collecting import own_flags

    verdicts: list[Verdict] = []
    with Spares() as spares:
        spares.hold(held, _servable(run), alone=True)
        searching = replace(options, budget=budget)
        search = search_wrong_value(
            dump_dir, found.index, run, searching, replaying, quiet, spares=spares
        )
        if search is not None:
            selection = differential.merged(selection, search, limit=options.limit)
        if not selection.chosen:
            return
        known = differential.known_verdicts(search if options.data else None, selection.chosen)
        verdicts.extend(known.values())
        replaying = replaying.of_modules(run, (c.module.name for c in selection.chosen))
        interrupted = False
        for chosen in selection.chosen:
            if not spares.held:  # the program has gone: the stages' children do the rest
                return
            if chosen.module.label in known:
                continue
            replays = replay_stage(
                dump_dir, (chosen,), run.failure, replaying, ui=quiet, spares=spares
            )
            verdicts.extend(replays.verdicts)
            interrupted = interrupted or replays.interrupted
        if spares.held and not interrupted:
            # The question the run's own flags ask, as the stage after the run asks it.
            served = replace(replaying, options=replace(replaying.options, spares=spares))
            with quiet.timed("ahead without own flags"):
                own_flags.probe(dump_dir, selection, run, verdicts, served, ui=quiet)


def _platform(index: DumpIndex, selection: Selection) -> str | None:
    """The platform of the modules the stages would replay: the chosen first's, else (a
    wrong result, its modules found by the search) the first module's."""
    if selection.chosen:
        return selection.chosen[0].module.platform
    return index.modules[0].platform if index.modules else None


def _servable(run: RunRecord) -> Callable[[Mapping[str, str], Mapping[str, object]], bool]:
    """Which replays the program may make: those under the run's own flags, and those
    without some of them where each of the run's own XLA flags (its XLA_FLAGS, the whole
    process's) is said outright in the replay's own (``own_flags.without_flags`` sets a
    boolean back to its default); a flag it cannot set back keeps the replay in a child."""
    from xla_bugkit.bundle.own_flags import flag_name, starts_process
    from xla_bugkit.collecting.own_flags import own_xla_flags

    # The device count stays the program's, as the module is partitioned for it.
    process = {flag_name(f) for f in own_xla_flags(run) if not starts_process(f)}

    def servable(env: Mapping[str, str], spec: Mapping[str, object]) -> bool:
        if not spec.get("flags_given"):
            return True
        said = spec.get("flags")
        given = {flag_name(str(f)) for f in said} if isinstance(said, list) else set()
        return process <= given

    return servable
