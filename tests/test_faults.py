"""Fault injection through the real command line (#34): hostile paths, caches, launches,
flags and files. Each fault ends as lengen promises (docs/scaling.md, "Faults lengen
survives"): one line naming the key or path and what is allowed, the exit status documented in
``lengen.cli``, no traceback, and nothing written or changed on disk.

Plain bad values are tests/test_bad_input.py's table; this module holds the faults that need a
scene (a file in the way, a read-only mount, a damaged cache or results file, a signal) or a
finished run. The refusals run a few at a time, each in its own folder, which is listed before
and after (every file, with its size and modification time)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import ROOT, run_train
from lengen.preflight import NODE_VARIABLES

LONG = "x" * 300  # longer than any file system's name limit (255 bytes)


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    #: the command line after the script; {tmp} is the case's own folder (see ``scene``)
    arguments: str
    #: what the first line of stderr holds: the key or path, then what is allowed
    expected: str
    status: int = 2
    #: environment changes ({tmp} too); None removes a variable
    env: tuple[tuple[str, str | None], ...] = ()
    script: str = "train.py"


FAULTS = [
    # -- how the run would start ---------------------------------------------------------------
    Fault(
        "several nodes, nothing to start them (waited forever, deaf to signals)",
        "debug=fast trainer.num_nodes=2 trainer.accelerator=cpu",
        "trainer.num_nodes=2: nothing here starts the other nodes",
    ),
    Fault(
        "half precision on the CPU",
        "debug=fast trainer.precision=bf16-mixed trainer.accelerator=cpu",
        "trainer.precision=bf16-mixed: half precision needs a GPU",
    ),
    Fault(
        "several processes per run in a local sweep",
        "-m debug=fast trainer.devices=2 trainer.accelerator=cpu",
        "trainer.devices=2 (several processes per run) cannot run inside a local -m sweep",
    ),
    # -- Hydra's flags do not skip the checks --------------------------------------------------
    Fault(
        "--config-dir",
        "--config-dir=configs debug=fast data.len=-3",
        "data.len must be a positive integer, got -3",
    ),
    Fault(
        "--config-name",
        "--config-name=train debug=fast data.len=-3",
        "data.len must be a positive integer, got -3",
    ),
    Fault("--config-dir that does not exist", "--config-dir={tmp}/nope", "--config-dir="),
    # -- where the run writes ------------------------------------------------------------------
    Fault(
        "hydra.run.dir under a file",
        "debug=fast hydra.run.dir={tmp}/afile/run",
        "hydra.run.dir={tmp}/afile/run: {tmp}/afile is a file; allowed: a directory path",
    ),
    Fault(
        "hydra.sweep.dir naming a file",
        "-m debug=fast hydra.sweep.dir={tmp}/afile",
        "hydra.sweep.dir={tmp}/afile is a file; allowed: a directory path",
    ),
    Fault(
        "hydra.run.dir with a 300-character name",
        f"debug=fast hydra.run.dir={{tmp}}/{LONG}/run",
        "is 300 bytes long (at most 255); allowed: a directory path",
    ),
    Fault(
        "hydra.sweep.dir with a 300-character name",
        f"-m debug=fast hydra.sweep.dir={{tmp}}/{LONG}",
        "is 300 bytes long (at most 255); allowed: a directory path",
    ),
    Fault(
        "resume=true where results.json is a directory",
        "debug=fast resume=true hydra.run.dir={tmp}/results_dir",
        "hydra.run.dir: {tmp}/results_dir/results.json is not a file",
    ),
    Fault(
        "resume=true where results.json is cut short",
        "debug=fast resume=true hydra.run.dir={tmp}/results_cut",
        "hydra.run.dir: {tmp}/results_cut/results.json cannot be read",
    ),
    # -- caches --------------------------------------------------------------------------------
    Fault(
        "LENGEN_CACHE_DIR naming a file",
        "debug=fast hydra.run.dir={tmp}/run",
        "LENGEN_CACHE_DIR={tmp}/afile is a file; allowed: a writable directory",
        env=(
            ("LENGEN_CACHE_DIR", "{tmp}/afile"),
            ("MPLCONFIGDIR", None),
            ("TORCHINDUCTOR_CACHE_DIR", None),
        ),
    ),
    Fault(
        "MPLCONFIGDIR under a file",
        "debug=fast hydra.run.dir={tmp}/run",
        "MPLCONFIGDIR={tmp}/afile/mpl: {tmp}/afile is a file",
        env=(("MPLCONFIGDIR", "{tmp}/afile/mpl"),),
    ),
    Fault(
        "data.cache_dir naming a file",
        "debug=fast data=text data.files.train={tmp}/corpus.txt data.cache_dir={tmp}/afile "
        "hydra.run.dir={tmp}/run",
        "data.cache_dir={tmp}/afile is a file; allowed: a writable directory",
    ),
    Fault(
        "eval.py with LENGEN_CACHE_DIR naming a file",
        "run={tmp}/run",
        "LENGEN_CACHE_DIR={tmp}/afile is a file",
        env=(
            ("LENGEN_CACHE_DIR", "{tmp}/afile"),
            ("MPLCONFIGDIR", None),
            ("TORCHINDUCTOR_CACHE_DIR", None),
        ),
        script="eval.py",
    ),
    # -- refusals that used to leave a run directory, or take long ------------------------------
    Fault(
        "text data for an encoder",
        "debug=fast data=text model=encoder data.files.train={tmp}/corpus.txt "
        "hydra.run.dir={tmp}/run",
        "model: data=text trains causal language models; allowed: model=decoder",
    ),
    Fault(
        "a single-line corpus to carve validation from",
        "debug=fast data=text data.files.train={tmp}/oneline.txt hydra.run.dir={tmp}/run",
        "data.files.train: {tmp}/oneline.txt is a single line",
    ),
    Fault(
        "init_from a file cut short",
        "debug=fast init_from={tmp}/cut.ckpt hydra.run.dir={tmp}/run",
        "init_from={tmp}/cut.ckpt: cut.ckpt is not a PyTorch checkpoint",
    ),
    Fault(
        "init_from a directory without a checkpoint",
        "debug=fast init_from={tmp}/results_dir hydra.run.dir={tmp}/run",
        "init_from={tmp}/results_dir: no checkpoint there",
    ),
    Fault(
        "eval.py changing the model's sizes",
        "run={tmp}/run model.d_model=64",
        "model.d_model=64: builds a different model than the checkpoint holds",
        script="eval.py",
    ),
    # -- a second round (#34): odd paths, tags and folders ---------------------------------------
    Fault(
        "hydra.run.dir a symbolic link to nothing (Hydra's mkdir: a traceback)",
        "debug=fast hydra.run.dir={tmp}/dangling",
        "hydra.run.dir={tmp}/dangling is a symbolic link to {tmp}/nowhere, which does not exist",
    ),
    Fault(
        "eval.py with a tag too long for a file name (a traceback after the evaluation)",
        f"run={{tmp}}/run tag={LONG}",
        "bytes long; allowed: at most 200 bytes",
        script="eval.py",
    ),
    Fault(
        "aggregate.py on a folder without runs (wrote six empty tables)",
        "{tmp}/empty",
        "{tmp}/empty: no run directories (holding config.yaml) below it; allowed:",
        script="scripts/aggregate.py",
    ),
    Fault(
        "plot.py on a folder without runs",
        "{tmp}/empty",
        "{tmp}/empty: no run directories (holding config.yaml) below it; allowed:",
        script="scripts/plot.py",
    ),
    Fault(
        "aggregate.py --tag naming another folder (wrote summary../x.csv)",
        "{tmp}/empty --tag ../x",
        "--tag '../x': allowed: a tag as eval.py names them",
        script="scripts/aggregate.py",
    ),
    Fault(
        "aggregate.py --metric of no metric (argparse printed its usage first)",
        "{tmp}/empty --metric bogus",
        "aggregate.py: argument --metric: invalid choice: 'bogus'",
        script="scripts/aggregate.py",
    ),
    Fault(
        "a sweep directory that is a symbolic link to nothing (FileExistsError traceback)",
        "-m debug=fast hydra.sweep.dir={tmp}/dangling",
        "hydra.sweep.dir={tmp}/dangling is a symbolic link to {tmp}/nowhere, which does not exist",
    ),
    Fault(
        "a run directory inside the config folder (written into the config tree)",
        "debug=fast hydra.run.dir=configs/pe/myrun",
        "hydra.run.dir=configs/pe/myrun is inside the config folder",
    ),
    Fault(
        "a sweep directory that is a run's (aggregation saw one run in the other)",
        "-m debug=fast hydra.sweep.dir={tmp}/arun",
        "hydra.sweep.dir={tmp}/arun is the run directory",
    ),
    Fault(
        "a run directory inside another run's",
        "debug=fast hydra.run.dir={tmp}/arun/inner",
        "hydra.run.dir={tmp}/arun/inner is inside the run directory",
    ),
    Fault(
        "plot.py pe-analysis --length 0 (the message named no option)",
        "pe-analysis --length 0 --out {tmp}/analysis",
        "--length must be an integer >= 2, got 0",
        script="scripts/plot.py",
    ),
    Fault(
        "plot.py attention --length 0 (found only once the model was loaded)",
        "attention {tmp}/run --length 0",
        "plot.py attention: argument --length: must be an integer >= 1, got '0'",
        script="scripts/plot.py",
    ),
]


def scene(folder: Path) -> None:
    """What the faults aim at, in a fresh folder."""
    (folder / "afile").write_text("mine\n")
    lines = "\n".join(f"line {i} of a small corpus, with a few words" for i in range(200))
    (folder / "corpus.txt").write_text(lines + "\n")
    (folder / "oneline.txt").write_text("one long line without an end " * 2000)
    (folder / "cut.ckpt").write_bytes(b"PK\x03\x04 cut short")
    (folder / "results_dir" / "results.json").mkdir(parents=True)
    (folder / "results_cut").mkdir()
    (folder / "results_cut" / "results.json").write_text('{"pe": "rope", "eval": [')
    (folder / "empty").mkdir()
    (folder / "dangling").symlink_to(folder / "nowhere")
    (folder / "arun").mkdir()
    (folder / "arun" / ".lock").write_text("")  # what every run directory holds
    (folder / "arun" / "config.yaml").write_text("seed: 0\n")


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` -> (size, mtime in ns): a write anywhere shows."""
    return {
        str(path.relative_to(folder)): (path.lstat().st_size, path.lstat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
    }


def environment(fault: Fault, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NODE_VARIABLES}
    env["OMP_NUM_THREADS"] = "1"
    for key, value in fault.env:
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value.format(tmp=folder)
    return env


def inflict(fault: Fault) -> tuple[subprocess.CompletedProcess, dict, dict, str]:
    """-> (the process, the folder's listing before and after, the folder's path)."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        scene(folder)
        before = listing(folder)
        done = subprocess.run(
            [sys.executable, str(ROOT / fault.script), *fault.arguments.format(tmp=folder).split()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=environment(fault, folder),
        )
        return done, before, listing(folder), str(folder)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple]:
    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip([f.name for f in FAULTS], pool.map(inflict, FAULTS), strict=True))


def test_the_names_are_unique():
    assert len({fault.name for fault in FAULTS}) == len(FAULTS)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_fault_is_one_line_naming_the_key_or_path(outcomes, fault):
    done, _, _, folder = outcomes[fault.name]
    assert done.returncode == fault.status, done.stderr[-2000:]
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and fault.expected.format(tmp=folder) in first, first


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_fault_prints_no_traceback(outcomes, fault):
    done = outcomes[fault.name][0]
    assert "Traceback" not in done.stderr and "HYDRA_FULL_ERROR" not in done.stderr


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_refused_fault_writes_nothing(outcomes, fault):
    _, before, after, _ = outcomes[fault.name]
    assert after == before


# -- read-only places: a read-only mount (root ignores permission bits), or a folder without
# write permission for anyone else ------------------------------------------------------------
def read_only_command(folder: Path, command: list[str]) -> list[str]:
    """``command`` seeing ``folder`` read-only: as root, a read-only mount in a mount namespace
    of its own (gone with the process); otherwise the folder's write permission removed."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return command
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: no way to make a read-only folder")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("root, but no mount namespaces here: no way to make a read-only folder")
    mount = 'mount -t tmpfs -o ro tmpfs "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", mount, str(folder), *command]


@pytest.mark.parametrize(
    ("arguments", "env", "expected"),
    [
        (
            "debug=fast hydra.run.dir={ro}/run",
            {},
            "hydra.run.dir={ro}/run: cannot be made: {ro} is not writable",
        ),
        (
            "-m debug=fast hydra.sweep.dir={ro}/sweep",
            {},
            "hydra.sweep.dir={ro}/sweep: cannot be made: {ro} is not writable",
        ),
        (
            "debug=fast hydra.run.dir={tmp}/run",
            {"LENGEN_CACHE_DIR": "{ro}/cache"},
            "LENGEN_CACHE_DIR={ro}/cache: cannot be made: {ro} is not writable",
        ),
        (
            "debug=fast hydra.run.dir={tmp}/run",
            {"HOME": "{ro}", "LENGEN_CACHE_DIR": None},
            "~/.cache/lengen (LENGEN_CACHE_DIR unset): {ro}/.cache/lengen: cannot be made",
        ),
    ],
    ids=["run dir", "sweep dir", "LENGEN_CACHE_DIR", "home"],
)
def test_a_read_only_place_is_refused_in_one_line(tmp_path, arguments, env, expected):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    values = {"ro": read_only, "tmp": tmp_path}
    variables = {k: v for k, v in os.environ.items() if k not in NODE_VARIABLES}
    variables.pop("MPLCONFIGDIR", None)  # the caches follow LENGEN_CACHE_DIR (or HOME)
    variables.pop("TORCHINDUCTOR_CACHE_DIR", None)
    for key, value in env.items():
        if value is None:
            variables.pop(key, None)
        else:
            variables[key] = value.format(**values)
    before = listing(tmp_path)
    command = [sys.executable, str(ROOT / "train.py"), *arguments.format(**values).split()]
    try:
        done = subprocess.run(
            read_only_command(read_only, command),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=variables,
        )
    finally:
        read_only.chmod(0o755)
    assert done.returncode == 2, done.stderr[-2000:]
    assert expected.format(**values) in done.stderr.strip().splitlines()[0]
    assert "Traceback" not in done.stderr
    assert listing(tmp_path) == before


# -- Ctrl-C before the run starts ------------------------------------------------------------------
def past_the_handler(pid: int) -> None:
    """Wait until train.py has installed its Ctrl-C handler (its first lines, before it imports
    Hydra): PyYAML's extension, which Hydra's import loads, is mapped into the process."""
    maps = Path(f"/proc/{pid}/maps")
    if not Path("/proc/self/maps").exists():  # no /proc: the start takes well under a second
        time.sleep(1.0)
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if "/_yaml." in maps.read_text():
                return
        except OSError:  # the process has ended: the test says how
            return
        time.sleep(0.02)


def test_ctrl_c_during_the_checks_stops_quietly_and_writes_nothing(tmp_path):
    # a sweep of many values: its checks compose and check each, long enough to be interrupted
    seeds = ",".join(str(seed) for seed in range(60))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "-m", "debug=fast", f"seed={seeds}"]
        + [f"hydra.sweep.dir={tmp_path}/sweep"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    past_the_handler(process.pid)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, stderr[-2000:]
    assert "interrupted by SIGINT (Ctrl-C) before the run started; nothing written" in stderr
    assert "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []


# -- a refusal only the built run can make ----------------------------------------------------------
def test_a_refusal_after_hydra_made_the_directory_removes_it(tmp_path):
    # the validation text is shorter than the longest evaluation length: known only once the
    # corpus is tokenised, after Hydra created the run directory and its log
    (tmp_path / "corpus.txt").write_text("a few words of text\n" * 40)
    before = listing(tmp_path)
    done = run_train(
        "debug=fast",
        "data=text",
        "data.tokenizer=char",
        f"data.files.train={tmp_path}/corpus.txt",
        "data.len=8",
        "eval.lengths=[8,4096]",
        f"hydra.run.dir={tmp_path}/new/run",
        one_thread=True,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "eval.lengths: length 4096 needs 4096 scored tokens" in done.stderr
    assert "Traceback" not in done.stderr
    assert listing(tmp_path) == before


# -- faults aimed at a finished run: refused before torch is imported, the run unchanged -------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """One tiny trained run for the module, trained in this process (``lengen.train.run``, what
    train.py calls): the faults aimed at it are the real command line's, its making is not
    their subject, and a train.py process of its own cost a start-up of torch and Lightning."""
    from helpers import compose_train
    from lengen.train import run

    run_dir = tmp_path_factory.mktemp("finished") / "run"
    cfg = compose_train("trainer.max_steps=2", "eval.lengths=[8]", "eval.diagnostics=false")
    run(cfg, run_dir=run_dir)
    return run_dir


def damage_seed(run_dir: Path) -> None:
    """config.yaml of another seed than the checkpoint's: as if two runs' checkpoints were
    swapped."""
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("\nseed: 0\n", "\nseed: 7\n"))


def cut_checkpoint(run_dir: Path) -> None:
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:5000])


def cut_results(run_dir: Path) -> None:
    (run_dir / "results.json").write_text('{"pe": "rope", "eval": [')


@pytest.mark.parametrize(
    ("damage", "arguments", "expected"),
    [
        (
            damage_seed,
            "eval.py run={run}",
            "run={run}: checkpoints/last.ckpt was trained with another config than config.yaml",
        ),
        (cut_checkpoint, "eval.py run={run}", "checkpoints/last.ckpt is not a complete PyTorch"),
        (None, "eval.py run={run} tag=a/b", "tag='a/b': allowed: letters, digits"),
        (None, "eval.py run={run} model.n_layers=3", "model.n_layers=3: builds a different"),
        (
            cut_results,
            "train.py debug=fast resume=true hydra.run.dir={run}",
            "hydra.run.dir: {run}/results.json cannot be read",
        ),
        # (a yaml error escaped as a traceback; ``+key`` was read as a key named "+eval")
        (None, "eval.py run={run} eval.lengths=[8,", "eval.lengths: cannot apply"),
        (None, "eval.py run={run} +eval.samples=4", "+eval.samples: a re-evaluation changes keys"),
    ],
    ids=["swapped checkpoint", "checkpoint cut short", "bad tag", "model size", "results cut"]
    + ["a value cut short", "a Hydra prefix"],
)
def test_a_fault_aimed_at_a_finished_run_changes_nothing(
    finished_run, tmp_path, damage, arguments, expected
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    if damage is not None:
        damage(run_dir)
    before = listing(tmp_path)
    script, *rest = arguments.format(run=run_dir).split()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / script), *rest],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    imports = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    said = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 2, "\n".join(said)[-2000:]
    assert said[0].startswith("error: ") and expected.format(run=run_dir) in said[0], said
    assert "Traceback" not in done.stderr
    assert "torch" not in [line.split("|")[-1].strip() for line in imports]  # before torch
    assert listing(tmp_path) == before


def test_a_default_run_dir_that_cannot_be_made_is_refused(tmp_path):
    # the default directory is under results/ of the current folder: here a file of that name
    (tmp_path / "results").write_text("mine\n")
    before = listing(tmp_path)
    done = run_train("debug=fast", cwd=tmp_path, timeout=120, one_thread=True)
    assert done.returncode == 2, done.stderr[-2000:]
    first = done.stderr.strip().splitlines()[0]
    assert (
        first.startswith("error: hydra.run.dir (default)=results/runs: ") and "is a file" in first
    )
    assert listing(tmp_path) == before


# -- a signal, then resume=true: the log and results of the uninterrupted run -----------------------
#: one training step, validated after it (debug=fast's interval is cut to max_steps), logged every
#: third step: the step's training row is one the uninterrupted log does not hold
ONE_STEP = ["debug=fast", "trainer.max_steps=1", "trainer.log_every_n_steps=3", "eval.lengths=[8]"]
ONE_STEP += ["eval.diagnostics=false"]


def log_rows(run_dir: Path) -> list[tuple[str, tuple[str, ...]]]:
    """metrics.csv as (step, the columns it fills) per row, in order."""
    import csv

    with open(run_dir / "logs" / "metrics.csv") as file:
        rows = csv.DictReader(file)
        return [
            (row["step"], tuple(k for k, v in row.items() if v and k != "step")) for row in rows
        ]


@pytest.fixture(scope="module")
def stopped_at_the_last_step(tmp_path_factory) -> dict[str, Path]:
    """The one-step run uninterrupted, and stopped by SIGTERM once it started (it stops after
    its first step, the last, with a checkpoint) and resumed. The uninterrupted one trains in
    this process (``lengen.train.run``, what train.py calls, on one thread as the others): only
    the stopped one needs a process of its own, to be signalled."""
    import torch

    from helpers import compose_train
    from lengen.train import run

    root = tmp_path_factory.mktemp("stopped")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(ROOT / "train.py"), *ONE_STEP, f"hydra.run.dir={root / 'cut'}"]
    cut = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (root / "cut" / "config.yaml").exists():  # written when the run starts
        assert cut.poll() is None and time.monotonic() < deadline, cut.communicate()[1][-2000:]
        time.sleep(0.02)
    cut.send_signal(signal.SIGTERM)
    _, stderr = cut.communicate(timeout=120)
    assert cut.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "interrupted by SIGTERM at step 1" in stderr, stderr[-2000:]
    resumed = run_train(*ONE_STEP, "resume=true", f"hydra.run.dir={root / 'cut'}", one_thread=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # compose_train adds debug=fast itself
        run(compose_train(*(o for o in ONE_STEP if o != "debug=fast")), run_dir=root / "whole")
    finally:
        torch.set_num_threads(threads)
    return {"whole": root / "whole", "cut": root / "cut"}


def test_a_resumed_log_gains_no_row_the_uninterrupted_log_lacks(stopped_at_the_last_step):
    # the checkpoint carried its step's training row, which the resumed log restored although
    # Lightning logs only every trainer.log_every_n_steps steps
    runs = stopped_at_the_last_step
    assert log_rows(runs["cut"]) == log_rows(runs["whole"])


def test_a_run_stopped_at_its_last_step_resumes_with_the_final_validation(stopped_at_the_last_step):
    # the last step's checkpoint was written before the validation that follows it
    whole, cut = (
        json.loads((stopped_at_the_last_step[name] / "results.json").read_text())
        for name in ("whole", "cut")
    )
    assert cut["resumed"] and cut["validation"]
    assert cut["validation"] == pytest.approx(whole["validation"], abs=1e-6)


# -- a sweep folder with one damaged results.json: the others are aggregated ------------------------
def wrong_row_type(results: dict) -> None:
    results["eval"][0]["length"] = "long"


def wrong_seed_type(results: dict) -> None:
    results["seed"] = {"value": 0}


def aggregate(folder: Path) -> subprocess.CompletedProcess:
    """scripts/aggregate.py on ``folder``, as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "aggregate.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("damage", [wrong_row_type, wrong_seed_type], ids=["row", "seed"])
def test_aggregate_lists_results_of_the_wrong_types_as_failed(tmp_path, damage):
    # a string length crashed the rows' sort, a mapping seed the duplicate check (tracebacks)
    results = {"pe": "rope", "model": "decoder", "task": "copy", "train_len": 8, "seed": 0}
    results |= {"n_params": 10, "train_tokens": 80, "provenance": {}}
    row = {"length": 8, "in_distribution": True, "max_position": 17, "protocol": "teacher_forced"}
    row |= {"n_examples": 8, "loss": 1.0, "accuracy": 0.5, "exact_match": 0.0, "ppl": None}
    results["eval"] = [row, {**row, "length": 16, "in_distribution": False}]
    damage(results)
    run_dir = tmp_path / "sweep" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("pe:\n  name: rope\nseed: 0\n")
    (run_dir / "results.json").write_text(json.dumps(results))
    done = aggregate(tmp_path / "sweep")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    failed = (tmp_path / "sweep" / "failed.csv").read_text()
    assert "results.json does not follow the schema" in failed and "wrong type" in failed


def test_aggregate_finds_a_run_made_inside_another_runs_folder(tmp_path):
    # a run nested in another's folder (made by hand or before the pre-check refused such a
    # hydra.run.dir) was dropped silently, since a run directory was not searched further
    results = {"pe": "rope", "model": "decoder", "task": "copy", "train_len": 8, "seed": 0}
    results |= {"n_params": 10, "train_tokens": 80, "provenance": {}}
    row = {"length": 8, "in_distribution": True, "max_position": 17, "protocol": "teacher_forced"}
    row |= {"n_examples": 8, "loss": 1.0, "accuracy": 0.5, "exact_match": 0.0, "ppl": None}
    for run_dir, seed in ((tmp_path / "sweep" / "run", 0), (tmp_path / "sweep" / "run" / "sub", 1)):
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(f"pe:\n  name: rope\nseed: {seed}\n")
        (run_dir / "results.json").write_text(json.dumps({**results, "seed": seed, "eval": [row]}))
    done = aggregate(tmp_path / "sweep")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "run/sub" in (tmp_path / "sweep" / "runs.csv").read_text()


def test_plot_attention_at_a_length_no_memory_holds_is_one_line(finished_run, tmp_path):
    # a length no memory holds: torch's allocator raised a RuntimeError traceback; then it was
    # caught as out of memory (exit 5); since dedb5e1 the run's config.yaml refuses it before
    # the checkpoint is loaded (maps are formed up to 4,096 tokens), as bad input
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    before = listing(tmp_path)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot.py"), "attention", str(run_dir)]
        + ["--length", "1000000000"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("error: --length 1000000000: ")
    assert "allowed: a shorter --length" in done.stderr
    assert "Traceback" not in done.stderr
    assert set(listing(tmp_path)) == set(before)  # (its probe of the folder's write access aside)


def test_a_run_whose_reader_goes_away_finishes(tmp_path):
    """`train.py … | head -1`: the first line read, the pipe closed; the run must not crash on
    its next print (BrokenPipeError, recorded as a failure) but finish and say so by status."""
    run_dir = tmp_path / "run"
    # short lengths, two evaluated, no attention statistics: fewer figures to draw, the same
    # prints after the first line (the estimate), each one to the closed pipe
    small = ["debug=fast", "data.len=4", "eval.factors=[1,2]", "eval.diagnostics=false"]
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *small, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    process.stdout.readline()
    process.stdout.close()
    assert process.wait(timeout=300) == 0
    assert (run_dir / "results.json").is_file() and not (run_dir / "failed.json").exists()
