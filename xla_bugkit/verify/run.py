"""Unpack a bundle safely, check it, replay every module, compare with what the reporter saw."""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from xla_bugkit import config
from xla_bugkit.archive import plan
from xla_bugkit.bundle import members, script_check
from xla_bugkit.bundle.installed import install_command
from xla_bugkit.bundle.manifest import (
    ModuleEntry,
    OpenBundle,
    edited_notice,
    open_bundle,
    pick_module,
)
from xla_bugkit.bundle.manifest.pick import SHRUNK
from xla_bugkit.convert import carrier
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import (
    Interpreted,
    Release,
    ReplayInput,
    ReplayOptions,
    RunContext,
    Spares,
    Unverified,
    elsewhere,
    fallback_note,
    replay_input,
    replay_module,
    replay_platform,
)
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import INTERPRET_MODE, OWN_CODE, Outcome, Verdict
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance
from xla_bugkit.verify.result import ModuleCheck, VerifyResult


def verify_bundle(
    path: Path,
    *,
    timeout: float = config.REPLAY_TIMEOUT,
    ui: Ui | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    fake_data: bool = False,
    release: Release | None = None,
) -> VerifyResult:
    """Unpack ``path`` into a fresh temporary folder, check it, and replay every module.

    Each replay gets ``timeout`` seconds; a hang's, as long as the reporter's run went
    without progress and the time a replay needs to start (``Failure.replay_timeout``).
    ``tolerance``: how far an output may be from its reference (the bundle never says);
    ``fake_data``: generated inputs even where the bundle has real ones; ``release``: replay
    under that jaxlib release instead of the installed one.
    """
    ui = ui or Ui()
    with contextlib.ExitStack() as stack:
        # A replay child imports jax (seconds) while the bundle unpacks; most bundles are
        # of CPU modules, and one of another platform gets a child of its own.
        spares = stack.enter_context(Spares())
        if release is None:  # children of the installed jaxlib only
            spares.start("cpu")
        b = stack.enter_context(
            open_bundle(path, prefix="xla-bugkit-verify-", unpacking=ui.phase("unpacking"))
        )
        failure = Failure.from_json(b.manifest["failure"])  # the loader checked it parses
        # Counted as collect counts them: the manifest too, which lists the others' hashes.
        ui.say(f"{path.name}: integrity ok ({len(b.manifest['files']) + 1} files)")
        for name in b.edited:
            ui.say(f"{edited_notice(name)} (human text: no replay reads it)")
        scripts = _scripts(b)
        for name, said in scripts:
            ui.say(f"{name}: {_SCRIPT_SAID.get(said, f'read it before you run it: {said}')}")
        timeout = failure.replay_timeout(timeout)
        # The flags in force in the reporter's process reach XLA as they did there, a memory
        # cap the program set itself is set again (the module must meet the same limits), and
        # a PyTorch/XLA module replays under torch_xla's own XLA first, where it is here.
        context = replace(
            RunContext.of_manifest(b.manifest),
            tolerance=tolerance,
            fake_data=fake_data,
            release=release,
        )
        if note := fallback_note(context.framework):
            ui.say(note)
        modules = b.manifest["modules"]
        checks = []
        for i, module in enumerate(modules):
            following = modules[i + 1].get("platform", "") if i + 1 < len(modules) else None
            upcoming = replay_platform(following) if following is not None else None
            ready = release is None and len(spares) < 2
            if ready and upcoming and not elsewhere.absent_here(upcoming):
                spares.start(upcoming)  # the next module's child, ready in time
            check = _replay_module(b, module, failure, timeout, ui, context, spares)
            checks.append(check)
    return VerifyResult(
        path,
        failure,
        tuple(checks),
        b.edited,
        scripts,
        context.process_flags,
        _compiler_options(b.manifest["modules"]),
    )


def _compiler_options(
    modules: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each module's ``compiler_options`` as the manifest lists them (only to be shown:
    its replay applies them from the module's debug options)."""
    found = []
    for m in modules:
        own = m.get("compiler_options")
        if isinstance(own, list) and own and all(isinstance(o, str) for o in own):
            found.append((str(m.get("label", "")), tuple(own)))
    return tuple(found)


_SCRIPT_SAID = {"checked": "xla-bugkit's own script, its settings checked (verify runs none of it)"}


def _scripts(b: OpenBundle) -> tuple[tuple[str, str], ...]:
    """What ``script_check`` says of each repro.py in the bundle (never run here)."""
    found = []
    for name in (members.REPRO, f"shrunk/{members.REPRO}"):
        path = b.root / name
        if path.is_file():
            said = script_check.check(path.read_text("utf-8", "replace"))
            found.append((name, "checked" if said is None else said))
    return tuple(found)


def _replay_module(
    b: OpenBundle,
    module: ModuleEntry,
    failure: Failure,
    timeout: float,
    ui: Ui,
    context: RunContext,
    spares: Spares | None = None,
) -> ModuleCheck:
    recorded = (module.get("replay") or {}).get("outcome")
    inp = replay_input(module["label"], b.module_files(module), module.get("platform", ""))
    if inp is None:
        return ModuleCheck(module["label"], None, recorded)
    inp = replace(inp, interpreted=_interpreted(b, module))
    with contextlib.ExitStack() as stack:
        if context.release is not None:  # an older release may not read the proto
            inp = stack.enter_context(carrier.with_text(inp, ui.say))
        if not elsewhere.absent_here(inp.platform):
            with ui.phase(f"replaying {module['label']}"):
                verdict = replay_module(
                    inp,
                    expected=failure,
                    context=context,
                    options=ReplayOptions(timeout=timeout, spares=spares),
                )
            if not elsewhere.missing_platform(verdict):
                return ModuleCheck(module["label"], verdict, recorded)
        return ModuleCheck(
            module["label"], None, recorded, _unverified(b, inp, failure, timeout, ui, context)
        )


def _interpreted(b: OpenBundle, module: ModuleEntry) -> Interpreted | None:
    """A Pallas kernel's outputs under the interpret mode, which the reporter's collect
    recorded by running the program under it (no replay can compute them): the bundle's
    expected.npz, where the reporter's verdict on ``module`` was judged by them and the
    module is the one repro.py runs (the first that reproduced)."""
    numbers = (module.get("replay") or {}).get("numbers") or {}
    expected = b.root / members.EXPECTED
    if numbers.get("reference") != INTERPRET_MODE or not expected.is_file():
        return None
    if not npz_fits(expected):
        return None
    if module["label"].endswith(SHRUNK) or pick_module(b.manifest["modules"], None) != module:
        return None
    # The reporter's verdict blamed the kernel's own code only where the program's check
    # failed under the interpret mode too.
    return Interpreted(expected, passed=False if numbers.get("kernel") == OWN_CODE else None)


def npz_fits(path: Path, limit: int = plan.MAX_TOTAL) -> bool:
    """``path`` is an ``.npz`` of ``.npy`` arrays whose sizes, as its members declare them,
    add up to no more than ``limit`` (the bound the archive's own extraction holds): a small
    file of a stranger's bundle cannot expand past it as it loads, since a zip member is
    read no further than it declares."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile):
        return False
    if not all(i.filename.endswith(".npy") for i in infos):
        return False
    return sum(i.file_size for i in infos) <= limit


def _unverified(
    b: OpenBundle,
    inp: ReplayInput,
    failure: Failure,
    timeout: float,
    ui: Ui,
    context: RunContext,
) -> Unverified:
    """A module of a platform this machine lacks: what can be checked, and its unoptimized
    form run on the CPU (the CPU compiles it from scratch: no GPU pass is involved)."""
    versions = b.manifest["versions"]
    if failure.out_of_memory_running:
        # The device's memory ran out: this machine's CPU and memory say nothing of it, and
        # a module that filled an accelerator's memory takes minutes to run here.
        said = (
            f"the {inp.platform.upper()}'s memory ran out, which a run on this machine's CPU "
            "cannot show"
        )
        cpu = Verdict(inp.name, Outcome.NOT_REPLAYABLE, said, "not run")
    else:
        with ui.phase(f"running {inp.name} on the CPU"):
            cpu = replay_module(
                replace(inp, platform="cpu"),
                expected=failure,
                context=context,
                options=ReplayOptions(timeout=timeout),
            )
    return Unverified(
        needs=elsewhere.needs(inp.platform, versions),
        checked=("integrity ok", *elsewhere.checks(inp)),
        cpu=elsewhere.cpu_line(cpu, inp.platform),
        command=elsewhere.command(b.path.resolve().name, inp.platform, versions, install_command()),
        cpu_verdict=cpu,
    )
