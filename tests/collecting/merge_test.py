"""``merge``: real ``jax.distributed`` jobs on this machine (CPU, gloo), each process under its
own collect as ``srun xla-bugkit collect -- python train.py`` starts them, merged into one
bundle that names the process that failed inside XLA and reproduces here."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, Collected, clean_env
from xla_bugkit.errors import ExitCode

pytestmark = [pytest.mark.slow, pytest.mark.jax]

JOB = PROGRAMS / "job_step.py"
# The job's coordination service gives up on a silent process after this many seconds (the
# program's own setting; jax's default is 100 s).
HEARTBEAT = "10"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job(
    folder: Path,
    processes: int,
    *mode: str,
    heartbeat: str = HEARTBEAT,
    named: bool = True,
    program: Path = JOB,
    grace: str | None = None,
    ready: Path | None = None,
) -> list[Collected]:
    """Every process of a job under its own collect, all at once; each one's Collected.
    ``program`` takes RANK N PORT, then ``mode``; ``heartbeat``: the job's heartbeat
    timeout, in seconds; ``named``: each collect is told its part (--job-part), else it
    learns it from jax.distributed once its program has run; ``grace``: each collect's
    --job-grace; ``ready``: the program's JOB_STEP_READY folder."""
    folder.mkdir(parents=True, exist_ok=True)
    port, started = str(_port()), []
    env = {**clean_env(), "JOB_STEP_HEARTBEAT": heartbeat}
    if ready is not None:
        env["JOB_STEP_READY"] = str(ready)
    for rank in range(processes):
        part = ["--job-part", f"{rank}/{processes}"] if named else []
        part += ["--job-grace", grace] if grace is not None else []
        command = [XLA_BUGKIT, "collect", "--timeout", "600", *part,
                   "-o", str(folder / "bundle.zip"), "--",
                   sys.executable, str(program), str(rank), str(processes), port,
                   *mode]  # fmt: skip
        # Files, not pipes: one collect must not block on a pipe read only later.
        with (folder / f"collect{rank}.err").open("w") as err:
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        started.append(child)
    done = []
    for rank, child in enumerate(started):
        child.wait(timeout=READY_TIMEOUT)
        part = folder / f"bundle.part-{rank}-of-{processes}.zip"
        done.append(Collected(child.returncode, (folder / f"collect{rank}.err").read_text(), part))
    return done


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([XLA_BUGKIT, "merge", *args], capture_output=True, text=True,
                          env=clean_env(), timeout=READY_TIMEOUT)  # fmt: skip


@pytest.fixture(scope="module")
def crash_job(tmp_path_factory: pytest.TempPathFactory) -> list[Collected]:
    """Process 1 of 2 has a host's XLA_FLAGS of its own and crashes compiling the step;
    process 0 blocks in the step's all-reduce until the job's service ends it."""
    return _job(tmp_path_factory.mktemp("crash"), 2, "crash-1")


def test_the_merged_bundle_is_judged_by_the_process_that_failed_in_xla(
    crash_job: list[Collected], tmp_path: Path
) -> None:
    survivor, crashed = crash_job
    assert crashed.returncode == ExitCode.OK, crashed.stderr[-3000:]
    assert survivor.returncode == ExitCode.NOT_REPRODUCED, survivor.stderr[-3000:]
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), str(survivor.bundle), str(crashed.bundle))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert (
        "a job of 2 processes on 1 machine, 2 devices each (4 in all): part 1 failed inside XLA"
        in said
    )
    assert "part 0" in said and "taken down by the job" in said
    assert "differ: XLA flags: part 1 adds --xla_disable_hlo_passes=copy-insertion" in said

    merged = Collected(done.returncode, done.stdout, out)
    manifest = merged.manifest()
    assert manifest["failure"]["kind"] == "compile crash"
    assert manifest["modules"][0]["name"] == "jit_train_step"
    assert manifest["modules"][0]["replay"]["outcome"] == "reproduced: crash"
    job = manifest["job"]
    assert (job["part"], job["parts"]) == (1, 2)
    by_part = {p["part"]: p for p in job["merged"]}
    assert by_part[0]["peer"] and not by_part[1]["peer"]
    assert by_part[1]["judged_by"] and by_part[0]["folder"] == "parts/part-0"
    # Both parts' ending times are recorded; the one that crashed stopped first.
    assert by_part[1]["ended"] < by_part[0]["ended"]

    # The step both processes compiled is kept once: part 0's copy is not in the bundle.
    names = merged.names()
    theirs = json.loads(merged.text("parts/part-0/manifest.json"))
    step = [m for m in theirs["modules"] if m["name"] == "jit_train_step"]
    assert step, "the survivor's bundle holds the step it was running"
    assert not any(f"parts/part-0/{p}" in names for p in step[0]["files"].values())
    assert "parts/part-0/log.txt" in names and "parts/part-0/ISSUE.md" not in names

    issue = merged.text("ISSUE.md")
    assert "### The job" in issue and "**Part 1 failed inside XLA**" in issue
    assert "part 1 adds `--xla_disable_hlo_passes=copy-insertion`" in issue
    assert "Part 0 compiled the same module (`module_" in issue
    assert "attach job.zip" in issue and "bundle.part-1-of-2.zip" not in issue
    # The module was compiled for the job's 4 devices: run_hlo_module gets as many.
    assert "--xla_force_host_platform_device_count=4 modules/" in issue

    # A maintainer verifies the job's bug on one machine: 4 CPU devices in one process.
    verified = subprocess.run([XLA_BUGKIT, "verify", str(out)], capture_output=True, text=True,
                              env=clean_env(), timeout=READY_TIMEOUT)  # fmt: skip
    assert verified.returncode == ExitCode.OK, verified.stdout + verified.stderr
    assert "the recorded failure reproduces here" in verified.stdout


def test_the_default_output_is_the_parts_name_and_a_folder_stands_for_its_parts(
    crash_job: list[Collected], tmp_path: Path
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    for part in crash_job:
        shutil.copy(part.bundle, folder / part.bundle.name)
    (folder / "notes.txt").write_text("not a part\n")
    done = _merge("--json", str(folder))
    assert done.returncode == ExitCode.OK, done.stderr
    result = json.loads(done.stdout)
    assert result["bundle"] == str(folder / "bundle.zip") and result["judged_by"] == 1
    assert (folder / "bundle.zip").is_file()


def test_the_size_budget_applies_to_the_whole_job(
    crash_job: list[Collected], tmp_path: Path
) -> None:
    whole = tmp_path / "whole.zip"
    assert _merge("-o", str(whole), *(str(p.bundle) for p in crash_job)).returncode == 0
    # Below the whole, above the failing part with the other's manifest and log.
    budget = whole.stat().st_size - 5_000
    out = tmp_path / "small.zip"
    done = _merge("--max-size", f"{budget}B", "-o", str(out), *(str(p.bundle) for p in crash_job))
    assert done.returncode == ExitCode.OK, done.stderr
    assert out.stat().st_size <= budget
    assert "over the size budget: leaving out parts/part-0/modules/" in done.stderr
    merged = Collected(0, "", out)
    names = merged.names()
    # What goes first is the other part's modules; the failing part's files all stay.
    assert all(n in names for n in zipfile.ZipFile(crash_job[1].bundle).namelist()
               if n != "ISSUE.md")  # fmt: skip
    assert "parts/part-0/manifest.json" in names
    assert any("left out for the size budget" in n for n in merged.manifest()["notes"])
    verified = subprocess.run([XLA_BUGKIT, "show", str(out)], capture_output=True, text=True,
                              env=clean_env(), timeout=READY_TIMEOUT)  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert "job part 1 (the part it is judged by): compile crash" in verified.stdout
    assert "job part 0 (parts/part-0): taken down by the job" in verified.stdout


def test_parts_that_do_not_belong_together_are_refused(
    crash_job: list[Collected], tmp_path: Path
) -> None:
    survivor, crashed = crash_job
    twice = tmp_path / "again.part-1-of-2.zip"
    shutil.copy(crashed.bundle, twice)
    done = _merge("-o", str(tmp_path / "a.zip"), str(crashed.bundle), str(twice))
    assert done.returncode == ExitCode.ERROR
    assert "are both part 1" in done.stderr and "Traceback" not in done.stderr
    # A part alone (the other's program did not fail, so its collect wrote no bundle).
    done = _merge("-o", str(tmp_path / "b.zip"), str(crashed.bundle))
    assert done.returncode == ExitCode.OK, done.stderr
    assert "missing: part 0 (a part whose program did not fail writes no bundle" in done.stdout
    broken = tmp_path / "broken.part-0-of-2.zip"
    broken.write_bytes(survivor.bundle.read_bytes()[:2000])
    done = _merge("-o", str(tmp_path / "c.zip"), str(broken), str(crashed.bundle))
    assert done.returncode == ExitCode.BAD_BUNDLE, done.stderr
    assert not (tmp_path / "c.zip").exists()


def test_a_job_whose_every_process_fails_the_same_way(tmp_path: Path) -> None:
    # On a loaded machine a process may still be compiling when the first one's crash ends
    # the job, and a short grace would end it before its own crash: each part is given the
    # time to fail by itself, which is what this test is about. Process 0, whose crash ends
    # the job's coordination service, compiles the step after the others have begun to.
    ready = tmp_path / "ready"
    ready.mkdir()
    parts = _job(tmp_path / "all", 3, "crash-all", grace="120s", ready=ready)
    for part in parts:
        assert part.returncode == ExitCode.OK, part.stderr[-3000:]
    done = _merge("-o", str(tmp_path / "job.zip"), *(str(p.bundle) for p in parts))
    assert done.returncode == ExitCode.OK, done.stderr
    said = " ".join(done.stdout.split())
    assert "a job of 3 processes" in said and "failed first; every part failed this way" in said
    manifest = Collected(0, "", tmp_path / "job.zip").manifest()
    merged = manifest["job"]["merged"]
    first = min(merged, key=lambda p: p["ended"])
    assert manifest["job"]["part"] == first["part"]
    assert manifest["modules"][0]["name"] == "jit_train_step"
    assert all(p["kind"] == "compile crash" for p in merged)


def test_a_launcher_under_one_collect_gives_the_same_answer(tmp_path: Path) -> None:
    """Today's path, all processes started on one machine by a launcher under one collect:
    the same process and module as the merged parts."""
    out = tmp_path / "bundle.zip"
    command = [XLA_BUGKIT, "collect", "--timeout", "600", "-o", str(out), "--",
               sys.executable, str(JOB), "launch", "2", "crash-1"]  # fmt: skip
    env = {**clean_env(), "JOB_STEP_HEARTBEAT": HEARTBEAT}
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=READY_TIMEOUT)  # fmt: skip
    collected = Collected(done.returncode, done.stderr, out)
    assert collected.returncode == ExitCode.OK, done.stderr[-3000:]
    manifest = collected.manifest()
    assert manifest["process"]["rank"] == 1
    assert manifest["modules"][0]["name"] == "jit_train_step"
    assert manifest["modules"][0]["replay"]["outcome"] == "reproduced: crash"


def test_a_wrong_result_in_the_sharded_step_is_judged_by_the_process_that_saw_it(
    tmp_path: Path,
) -> None:
    """jax#39103 in every device's shard; process 0 checks the gathered result and exits 1,
    process 1 waits for it at a barrier until the job ends it."""
    parts = _job(tmp_path / "wrong", 2, "wrong")
    checked, waiting = parts
    assert checked.returncode == ExitCode.OK, checked.stderr[-3000:]
    assert waiting.returncode == ExitCode.NOT_REPRODUCED, waiting.stderr[-3000:]
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), *(str(p.bundle) for p in parts))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    manifest = Collected(0, "", out).manifest()
    assert manifest["job"]["part"] == 0
    assert manifest["failure"]["kind"] == "wrong result"
    assert manifest["modules"][0]["name"] == "jit_row_energy"
    assert manifest["modules"][0]["replay"]["outcome"] == "reproduced: wrong result"


def test_a_job_of_one_device_per_process_saves_its_shards_under_the_default(
    tmp_path: Path,
) -> None:
    """The same step, one device per process, each collect at its defaults (XLA's snapshot
    of every execution): XLA's snapshot of the step holds one process's shards alone, so the
    hook saves each process's shards with their places, and merge stitches them and
    replays the step on the job's inputs."""
    parts = _job(tmp_path / "one", 2, "wrong", "1")
    for part in parts:
        assert part.manifest()["job"]["parts"] == 2, part.stderr[-3000:]
        assert any(n.startswith("shards/") and "jit_row_energy.snapshot.shards-" in n
                   for n in part.names()), part.names()  # fmt: skip
    done = _merge("-o", str(tmp_path / "job.zip"), *(str(p.bundle) for p in parts))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "1 device each (2 in all)" in said, said
    assert "inputs: real inputs (stitched from the shards of 2 parts" in said, said
    replay = Collected(0, "", tmp_path / "job.zip").manifest()["modules"][0]["replay"]
    assert replay["outcome"] == "reproduced: wrong result"
    assert replay["judged_on"].startswith("replayed by merge on the inputs stitched")


def _verify(bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([XLA_BUGKIT, "verify", str(bundle)], capture_output=True, text=True,
                          env=clean_env(), timeout=READY_TIMEOUT)  # fmt: skip


@pytest.fixture(scope="module")
def data_job(tmp_path_factory: pytest.TempPathFactory) -> list[Collected]:
    """tests/programs/job_data_wrong.py: 2 processes of 2 devices; the last host's labels
    make its rows differ, and only there does jax#39103 show. Each process under collect's
    defaults (XLA's every-execution snapshots): each part holds its own process's shards."""
    return _job(tmp_path_factory.mktemp("data"), 2, program=PROGRAMS / "job_data_wrong.py")


def test_a_wrong_result_only_one_hosts_data_shows_reproduces_on_the_stitched_inputs(
    data_job: list[Collected], tmp_path: Path
) -> None:
    """Merged, the module replays on the job's global inputs, in verify as in merge."""
    parts = data_job
    checked = parts[0]
    assert checked.returncode == ExitCode.NOT_REPRODUCED, checked.stderr[-3000:]
    assert checked.manifest()["failure"]["kind"] == "wrong result"
    # Neither part holds the call's inputs whole: each keeps its own shards.
    for part in parts:
        assert part.manifest()["data"].startswith("no real inputs: this process's shards")
        assert any(n.startswith("shards/") and "jit_energies.snapshot.shards-" in n
                   for n in part.names())  # fmt: skip

    # One part alone: the inputs stay incomplete, and the module runs on generated values,
    # on which it is right; merge keeps the part's verdict and its exit.
    alone = tmp_path / "alone.zip"
    done = _merge("-o", str(alone), str(checked.bundle))
    assert "the inputs of module_0000.jit_energies are not stitched: no shards of it from " \
        "part 1" in done.stdout, done.stdout + done.stderr  # fmt: skip
    assert done.returncode == ExitCode.NOT_REPRODUCED, done.stdout + done.stderr
    verified = _verify(alone)
    assert verified.returncode == ExitCode.NOT_REPRODUCED, verified.stdout + verified.stderr
    assert "inputs: generated (seed 42)" in verified.stdout

    # Every part: the global inputs are stitched, and the wrong rows are the last host's.
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), *(str(p.bundle) for p in parts))
    assert "not stitched" not in done.stdout, done.stdout
    assert "inputs: real inputs (stitched from the shards of 2 parts" in done.stdout
    merged = Collected(done.returncode, done.stdout, out)
    manifest = merged.manifest()
    assert manifest["data"].startswith("real inputs (stitched from the shards of 2 parts")
    files = manifest["modules"][0]["files"]
    assert files["snapshot"].endswith("module_0000.jit_energies.snapshot.stitched.pb")
    assert "shards" not in files
    # The arrays stand for every part's shards of the module; another part's serve no one.
    assert not any("jit_energies.snapshot.shards-" in n for n in merged.names())
    assert not any(n.startswith("parts/part-1/shards/") for n in merged.names())
    verified = _verify(out)
    assert verified.returncode == ExitCode.OK, verified.stdout + verified.stderr
    said = " ".join(verified.stdout.split())
    assert "reproduced: wrong result" in said and "inputs: snapshot" in said
    first = int(said.split("first at [", 1)[1].split("]", 1)[0])
    assert first >= 2 * 16_385, said  # on a device of process 1
    ran = checked.stderr.split("energies wrong at ", 1)[1]
    assert f"first {first}:" in ran  # the row the run itself found wrong


def test_merge_judges_the_stitched_inputs_as_verify_does(
    data_job: list[Collected], tmp_path: Path
) -> None:
    """merge replays the module on the stitched inputs, and every view of the merged bundle
    says what verify of it says: reproduced, exit 0."""
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), *(str(p.bundle) for p in data_job))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    # The step's one call: its first execution on each part.
    on = (
        "replayed by merge on the inputs stitched from the shards of 2 parts, "
        "of execution 1 of it on each"
    )
    assert f"module: module_0000.jit_energies (reproduced: wrong result; {on})" in said, said
    merged = Collected(done.returncode, done.stdout, out)
    manifest = merged.manifest()
    replay = manifest["modules"][0]["replay"]
    assert (replay["outcome"], replay["judged_on"]) == ("reproduced: wrong result", on)
    # The part's own note (its replay had no real inputs) is not the merged bundle's.
    assert not any(n.startswith("no module has real inputs") for n in manifest["notes"])
    # The run's own flags (its device count) were weighed again on the stitched inputs.
    own = [n for n in manifest["notes"] if "this run set its own XLA flags" in n]
    assert own == [
        "on the stitched inputs, this run set its own XLA flags "
        "(--xla_force_host_platform_device_count=2); it fails without them (a replay still "
        "gives the module the devices it is partitioned for) too"
    ], manifest["notes"]
    assert "no sign of an XLA bug" not in manifest["title"], manifest["title"]
    issue = merged.text("ISSUE.md")
    assert f"Suggested title: {manifest['title']}" in issue
    assert "This does not look like an XLA bug" not in issue
    assert "XLA computes a wrong result in `jit(energies)`" in issue
    assert "| `module_0000.jit_energies` | **reproduced: wrong result** |" in issue
    as_json = _merge(
        "--json", "-o", str(tmp_path / "again.zip"), *(str(p.bundle) for p in data_job)
    )
    record = json.loads(as_json.stdout)
    assert as_json.returncode == record["exit_code"] == ExitCode.OK, as_json.stderr
    assert record["title"] == manifest["title"]
    assert record["modules"][0]["replay"] == replay
    verified = _verify(out)
    assert verified.returncode == ExitCode.OK, verified.stdout + verified.stderr
    assert replay["outcome"] in " ".join(verified.stdout.split())  # merge's verdict is verify's


def test_a_module_merge_cannot_replay_keeps_its_parts_verdict(
    data_job: list[Collected], tmp_path: Path
) -> None:
    """A module of a platform this machine lacks (the parts' manifests say TPU): merge says
    it cannot replay it, and the part's own verdict stands, said as the part's."""
    elsewhere = [_on_platform(p.bundle, tmp_path / "tpu" / p.bundle.name, "tpu") for p in data_job]
    done = _merge("-o", str(tmp_path / "tpu.zip"), *map(str, elsewhere))
    assert done.returncode == ExitCode.NOT_REPRODUCED, done.stdout + done.stderr
    record = Collected(done.returncode, done.stdout, tmp_path / "tpu.zip").manifest()
    replay = record["modules"][0]["replay"]
    assert replay["outcome"] == "not reproduced"
    assert replay["judged_on"] == (
        "part 0's verdict, on generated (seed 42) inputs: not replayed on the stitched inputs "
        "(it needs a TPU, which this machine lacks)"
    )
    assert replay["judged_on"] in " ".join(done.stdout.split())


def _on_platform(bundle: Path, dest: Path, platform: str) -> Path:
    """A copy of a part's bundle whose manifest says its modules are of ``platform``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bundle) as z, zipfile.ZipFile(dest, "w") as out:
        for info in z.infolist():
            data = z.read(info)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                for module in manifest["modules"]:
                    module["platform"] = platform
                data = json.dumps(manifest).encode()
            out.writestr(info, data)
    return dest


def test_a_part_whose_program_succeeded_still_brings_its_shards(tmp_path: Path) -> None:
    """The same job, its other process ending well: its collect writes its part all the
    same (exit 5, no failure), for its shards, and the merged bundle reproduces."""
    parts = _job(tmp_path / "finish", 2, "finish", program=PROGRAMS / "job_data_wrong.py")
    finished = parts[1]
    assert finished.returncode == ExitCode.NO_FAILURE, finished.stderr[-3000:]
    assert finished.manifest()["failure"]["kind"] == "success"
    assert any(n.startswith("shards/") for n in finished.names())
    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), *(str(p.bundle) for p in parts))
    assert "inputs: real inputs (stitched from the shards of 2 parts" in done.stdout, done.stdout
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    verified = _verify(out)
    assert verified.returncode == ExitCode.OK, verified.stdout + verified.stderr
    assert "reproduced: wrong result" in verified.stdout


def test_a_job_whose_data_goes_wrong_at_a_later_step_is_stitched_from_that_step(
    tmp_path: Path,
) -> None:
    """tests/programs/job_later_step.py: every step is right until the last host's data of
    the last step (the fourth). Each part keeps the shards of the step's first call and of its
    two newest; merge stitches the newest, the same execution on both parts, and the merged
    bundle reproduces on it, in merge and in verify."""
    parts = _job(tmp_path / "later", 2, program=PROGRAMS / "job_later_step.py")
    checked, finished = parts
    assert checked.returncode == ExitCode.NOT_REPRODUCED, checked.stderr[-3000:]
    assert finished.returncode == ExitCode.NO_FAILURE, finished.stderr[-3000:]
    for part in parts:
        held = [n for n in part.names() if "jit_energies.snapshot.shards-" in n]
        assert len(held) == 3, held  # the first call's and the two newest, not every step's

    out = tmp_path / "job.zip"
    done = _merge("-o", str(out), *(str(p.bundle) for p in parts))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert "differ" not in done.stdout, done.stdout  # both parts' newest is the same step
    merged = Collected(done.returncode, done.stdout, out)
    manifest = merged.manifest()
    [module] = [m for m in manifest["modules"] if m["name"] == "jit_energies"]
    assert module["replay"]["outcome"] == "reproduced: wrong result", module["replay"]
    on = "replayed by merge on the inputs stitched from the shards of 2 parts"
    assert module["replay"]["judged_on"] == f"{on}, of execution 4 of it on each"
    assert f"{module['label']}: execution 4 of the module on each part" in manifest["data"]
    # The stitched inputs are the fourth step's: the last host's labels there hold new
    # classes, which no step before read.
    _, labels = merged.recorded_inputs(module["label"])
    assert labels.shape == (4 * 16_385,)
    half = labels.size // 2
    assert labels[:half].max() < 4 <= labels[half:].max()

    verified = _verify(out)
    assert verified.returncode == ExitCode.OK, verified.stdout + verified.stderr
    assert "reproduced: wrong result" in verified.stdout
