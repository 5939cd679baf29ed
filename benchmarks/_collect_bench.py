"""P1 (collect's overhead over running the program by hand) and P4 (verify's time)."""

from __future__ import annotations

import importlib.util
import json
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from _common import (
    Config,
    Row,
    checked,
    child_env,
    dump_env,
    fresh_dir,
    median_time,
    program_cmd,
    ratio,
    run_child,
    secs,
    timed,
)

from xla_bugkit import archive
from xla_bugkit.bundle import envinfo
from xla_bugkit.collecting import CollectOptions, running, stages
from xla_bugkit.collecting.options import Findings
from xla_bugkit.redact import Redactor
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Verdict

# collect's exit codes that still mean "bundle written": reproduced, not reproduced, no failure.
_BUNDLE_WRITTEN = (0, 3, 5)
_VERIFY_DONE = (0, 3)  # reproduced, or not reproduced: both are a finished verify


@dataclass(frozen=True)
class CliRun:
    replay: bool
    wall: float | None  # None: it failed
    bundle: Path
    error: str = ""


@dataclass(frozen=True)
class P1:
    hand: list[float]
    pieces: dict[str, float]
    cli: dict[bool, CliRun] = field(default_factory=dict)  # by "with replay"
    module: str = ""  # the module the library pieces chose (for P4)
    imports: dict[str, float] = field(default_factory=dict)  # fresh-interpreter import times


def bugkit(cfg: Config, *args: str) -> list[str]:
    return [cfg.python, "-m", "xla_bugkit", *args]


def _hand(cfg: Config) -> float:
    """The program, run by hand with the same dump flags into a fresh folder."""
    dump = fresh_dir(cfg.work / "p1" / "hand")
    done, took = run_child(program_cmd(cfg), env=dump_env(dump))
    checked(done)
    return took


def run_cli(cfg: Config, *, replay: bool) -> CliRun:
    base = fresh_dir(cfg.work / "p1" / ("cli-replay" if replay else "cli"))
    out = base / "bundle.7z"
    # --always: the program succeeds, and a successful run is bundled only when asked.
    args = ["collect", "--always", "--workdir", str(base / "w"), "-o", str(out)]
    args += [] if replay else ["--no-replay"]
    done, took = run_child([*bugkit(cfg, *args), "--", *program_cmd(cfg)])
    if done.returncode not in _BUNDLE_WRITTEN or not out.exists():
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return CliRun(replay, None, out, f"exit {done.returncode}: {why[0][:200]}")
    return CliRun(replay, took, out)


def _pieces(cfg: Config) -> tuple[dict[str, float], str]:
    """collect's stages, each timed by calling the library's pipeline stage directly."""
    base = fresh_dir(cfg.work / "p1" / "lib")
    options = CollectOptions(output=base / "bundle.7z")
    run, t_rerun = timed(lambda: running.run_program(program_cmd(cfg), base, options))
    found, t_index = median_time(lambda: stages.index_dumps(base / "dump", run), cfg.reps)
    sel, t_select = median_time(lambda: stages.choose(found.index, run, options), cfg.reps)
    t: dict[str, float] = {"rerun": t_rerun, "index": t_index, "select": t_select}
    verdicts: tuple[Verdict, ...] = ()
    quiet = Ui(verbosity=-1)
    if not cfg.smoke:  # a replay child imports jax and compiles: seconds the smoke test lacks
        verdicts, t["replay"] = timed(
            lambda: stages.replay_chosen(base / "dump", sel, run, options, quiet)
        )
    redactor = Redactor.for_this_machine()
    env = envinfo.collect_env(redactor, probe_devices=False)
    stage = base / "stage"
    _, t["stage"] = timed(
        lambda: stages.stage_bundle(
            stage, Findings(found, sel, run, verdicts), options, redactor=redactor, env=env
        )
    )
    _, t["archive"] = timed(lambda: stages.archive_bundle(stage, options, "7z", quiet))
    return t, sel.chosen[0].module.name if sel.chosen else ""


def measure_collect(cfg: Config) -> P1:
    """Interleaved: hand, library pieces, CLI without and with replay, hand again, so a slow
    patch of the machine lands on both sides."""
    hand = [_hand(cfg)]
    pieces, module = _pieces(cfg)
    cli = {False: run_cli(cfg, replay=False)}
    if not cfg.smoke:
        cli[True] = run_cli(cfg, replay=True)
        hand.append(_hand(cfg))
    # The smoke run skips jax's import: seconds it cannot spare.
    return P1(hand, pieces, cli, module, _imports(cfg, _IMPORTS[:2] if cfg.smoke else _IMPORTS))


# What a fresh interpreter pays before doing any work: the CLI's and the children's start-up.
CLI_START = "xla_bugkit.cli.commands.collect"
_IMPORTS = (CLI_START, "ml_dtypes", "jax")


def _imports(cfg: Config, modules: tuple[str, ...]) -> dict[str, float]:
    bare = run_child([cfg.python, "-c", "pass"])[1]
    return {m: run_child([cfg.python, "-c", f"import {m}"])[1] - bare for m in modules}


def retry_cli(cfg: Config, p1: P1) -> P1:
    """The CLI may have been unfinished when the run began: try the failed ones once more."""
    cli = {k: (run_cli(cfg, replay=k) if v.wall is None else v) for k, v in p1.cli.items()}
    return replace(p1, cli=cli)


def collect_rows(p1: P1) -> list[Row]:
    rows = [_cli_row(p1, p1.cli[False])]
    if True in p1.cli:
        rows.append(_cli_row(p1, p1.cli[True]))
    return rows


def _cli_row(p1: P1, run: CliRun) -> Row:
    hand = statistics.mean(p1.hand)
    replay = p1.pieces.get("replay", 0.0) if run.replay else 0.0
    what = "P1 `collect` with replay" if run.replay else "P1 `collect --no-replay`"
    target = "≤ 1.10x + replay" if run.replay else "≤ 1.10x"
    base = f"{secs(hand)} by hand" + (f" (+ {secs(replay)} replay)" if run.replay else "")
    if run.wall is None:
        return Row(what, "failed", base, "", target, None, run.error)
    met = run.wall <= 1.10 * hand + replay
    note = "" if run.replay else _pieces_note(p1)
    return Row(what, secs(run.wall), base, ratio(run.wall, hand), target, met, note,
               bound=_p1_bound(p1, run.wall - hand))  # fmt: skip


def _pieces_note(p1: P1) -> str:
    return "pieces: " + ", ".join(f"{k} {secs(v)}" for k, v in p1.pieces.items())


def _p1_bound(p1: P1, extra: float) -> str:
    hand = statistics.mean(p1.hand)
    parts = {k: v for k, v in p1.pieces.items() if k not in ("rerun", "replay")}
    parts["rerun beyond the by-hand run"] = p1.pieces["rerun"] - hand
    parts["CLI start-up"] = p1.imports[CLI_START]
    biggest = ", ".join(f"{k} {secs(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
    imp = p1.imports
    return (
        f"collect adds {secs(extra)} to a {secs(hand)} program (by-hand runs: "
        f"{', '.join(secs(t) for t in p1.hand)}): {biggest}. Importing "
        f"`{CLI_START}` takes {secs(imp[CLI_START])} in a fresh interpreter "
        f"(without ml_dtypes, {secs(imp['ml_dtypes'])} alone: only the "
        "replay child and the arguments of multi-device executions need it). The fixed costs "
        "weigh less as the program runs longer."
    )


def breakdown_rows(p1: P1) -> list[Row]:
    """Where collect's time goes, from the library pieces; the rest is CLI start-up etc."""
    hand = statistics.mean(p1.hand)
    names = {
        "rerun": "rerun of the program (`run.rerun`)",
        "index": "indexing (`stages.index_dumps`)",
        "select": "selection (`select.select`)",
        "replay": "replay of the chosen modules",
        "stage": "staging: redaction, manifest, environment (`stages.stage_bundle`)",
        "archive": "archiving (`stages.archive_bundle`, 7z)",
    }
    rows = [Row("program run by hand with the dump flags", secs(hand), note=_spread(p1.hand))]
    rows += [Row(names[k], secs(v), ratio=ratio(v, hand)) for k, v in p1.pieces.items()]
    # Start-up measured directly: wall minus pieces would mostly be the program's own spread.
    for module, took in p1.imports.items():
        rows.append(
            Row(f"`import {module}` in a fresh interpreter", secs(took), ratio=ratio(took, hand))
        )
    return rows


def _spread(times: list[float]) -> str:
    return "runs: " + ", ".join(secs(t) for t in times)


# --- P4 ---------------------------------------------------------------------------------


def verify_available() -> bool:
    return importlib.util.find_spec("xla_bugkit.cli.commands.verify") is not None


def bundled_module(bundle_path: Path) -> str:
    manifest = json.loads(archive.read_member(bundle_path, "manifest.json", 16 << 20))
    return str(manifest["modules"][0]["name"]) if manifest["modules"] else ""


def measure_verify(cfg: Config, p1: P1) -> list[Row]:
    if cfg.smoke:  # two jax children and a replay: more than the smoke test's minute allows
        return [Row("P4 `verify bundle.7z`", "skipped (smoke run)", target="≤ 1.5x + 3 s")]
    run = p1.cli.get(True) or p1.cli[False]
    module = bundled_module(run.bundle) if run.wall is not None else p1.module
    base = _baseline(cfg, module)
    if base is None:
        return [Row("P4 `verify`", "not measured", note=f"no function behind {module!r}")]
    compile_run, wall = base
    baseline = f"{secs(compile_run)} compile + run of {module} ({secs(wall)} with start-up)"
    target = "≤ 1.5x + 3 s"
    if not verify_available():
        return [Row("P4 `verify bundle.7z`", "not yet available", baseline, "", target)]
    if run.wall is None:
        return [Row("P4 `verify bundle.7z`", "no bundle", baseline, "", target, None, run.error)]
    done, took = run_child(bugkit(cfg, "verify", str(run.bundle)))
    if done.returncode not in _VERIFY_DONE:
        return [
            Row(
                "P4 `verify bundle.7z`",
                f"failed (exit {done.returncode})",
                baseline,
                "",
                target,
                None,
                done.stderr.strip()[-200:],
            )
        ]
    met = took <= 1.5 * compile_run + 3
    bound = (
        "verify starts a CLI (importing its command: see P1) and a replay child, which "
        f"imports jax ({secs(p1.imports['jax'])} here) while the parent unpacks and hashes the "
        "bundle, then compiles and runs the module, then its op-by-op and conservative-flag "
        "references, and exits without jax's teardown"
        + (
            f"; replaying the same module took {secs(p1.pieces['replay'])} in P1"
            if "replay" in p1.pieces
            else ""
        )
        + ". The +3 s allows for one start-up."
    )
    return [
        Row(
            "P4 `verify bundle.7z`",
            secs(took),
            baseline,
            ratio(took, compile_run),
            target,
            met,
            "bundle from `collect` with replay" if run.replay else "",
            bound=bound,
        )
    ]


def _baseline(cfg: Config, module: str) -> tuple[float, float] | None:
    """The chosen function's compile + one run in a fresh process, and that child's wall."""
    name = module.removeprefix("jit_")
    if not name.startswith("f"):
        return None
    done, wall = run_child(program_cmd(cfg, "--only", name, "--time"), env=child_env())
    checked(done)
    t = json.loads(done.stdout.strip().splitlines()[-1])
    return t["compile_s"] + t["run_s"], wall
