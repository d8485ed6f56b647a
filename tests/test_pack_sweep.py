"""Packs in a -m sweep (hydra.sweeper.pack, lengen.sweep_packs, lengen's sweeper): which jobs
share a pack, the plan's line, a pack refused before anything is written, and one real sweep
through train.py whose pack's members land where single runs would, counted as runs. The
engine's own properties (equivalence with single runs, resume, criterion, NaN): the tests of
lengen.pack."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, run_train
from lengen.checks import ConfigError
from lengen.cli import SweepReport
from lengen.preflight import composing, precheck, sweep_jobs
from lengen.sweep_packs import PACK_KEY, plan_line, plan_packs

#: a few steps of everything, one evaluation length, nothing optional
FAST = ("debug=fast", "data.len=4", "eval.factors=[1]", "eval.diagnostics=false", "logger=none")


def planned(*overrides: str, pack: int) -> tuple[list[list[str]], list[int]]:
    """``plan_packs`` over a sweep's jobs, composed as the sweeper composes them."""
    from hydra import compose

    jobs = sweep_jobs([*overrides, *FAST])
    with composing([CONFIG_DIR]):
        return plan_packs(
            jobs, lambda job: compose("train", overrides=list(job), return_hydra_config=True), pack
        )


def members_of(job: list[str]) -> list[dict] | None:
    values = [o.partition("=")[2] for o in job if o.startswith("hydra.sweeper.pack_members=")]
    return json.loads(values[0].strip("'")) if values else None


# -- which jobs share a pack ---------------------------------------------------------------------
def test_jobs_differing_only_in_seeds_share_packs_of_at_most_the_key_in_sweep_order():
    # sweep order: (seed 0, rope), (0, alibi), (1, rope), (1, alibi), (2, rope), (2, alibi)
    jobs, sizes = planned("seed=0,1,2", "pe=rope,alibi", pack=2)
    assert sizes == [2, 2, 1, 1]
    seeds = [[m["values"]["seed"] for m in members_of(job) or []] for job in jobs]
    assert seeds == [[0, 1], [0, 1], [], []]
    assert [o for o in jobs[0] if o.startswith(("seed=", "pe="))] == ["seed=0", "pe=rope"]
    assert [o for o in jobs[1] if o.startswith(("seed=", "pe="))] == ["seed=0", "pe=alibi"]
    assert [o for o in jobs[2] if o.startswith(("seed=", "pe="))] == ["seed=2", "pe=rope"]


def test_jobs_that_differ_in_what_they_train_run_alone():
    jobs, sizes = planned("model.d_model=32,64", pack=4)
    assert sizes == [1, 1] and all(members_of(job) is None for job in jobs)


def test_a_members_folder_is_its_single_jobs_folder():
    from lengen.identity import run_id

    jobs, _ = planned("data.seed=5,6", pack=2)
    from hydra import compose

    with composing([CONFIG_DIR]):
        configs = [compose("train", overrides=[*FAST, f"data.seed={s}"]) for s in (5, 6)]
    expected = [f"copy_decoder_rope_len4_seed0_{run_id(cfg)}" for cfg in configs]
    assert [m["subdir"] for m in members_of(jobs[0])] == expected
    assert expected[0] != expected[1]  # data.seed is in the run id


def test_the_plan_counts_runs_and_packs():
    assert plan_line(16, [8, 8]) == "16 runs in 2 packs"
    assert plan_line(10, [4, 4, 1, 1]) == "10 runs in 2 packs and 2 single runs"
    assert plan_line(3, [1, 1, 1]) == "3 runs"


# -- refused up front ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "arguments, message",
    [
        (["-m", "seed=0,1", f"{PACK_KEY}=0"], f"{PACK_KEY}=0: allowed: an integer >= 1"),
        (["seed=0", f"{PACK_KEY}=2"], f"{PACK_KEY}=2: packs are made of a -m sweep's runs"),
    ],
)
def test_the_pack_key_is_refused_in_one_line_naming_it(arguments, message):
    with pytest.raises(ConfigError, match=message):
        precheck([*arguments, *FAST])


def test_a_pack_that_cannot_train_refuses_the_sweep_before_anything_is_written(tmp_path):
    # dropout draws from one generator in a pack, not from each member's seed: refused
    folder = tmp_path / "sweep"
    result = run_train(
        "-m", "model.dropout=0.1", "seed=0,1", f"{PACK_KEY}=2", *FAST, f"hydra.sweep.dir={folder}"
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: model.dropout=0.1 cannot train in a pack ({PACK_KEY} > 1)")
    assert not folder.exists()


# -- run k of N and the time left count members ----------------------------------------------------
def pack_hydra(sweep_dir, number: int, members: list[str] | None) -> OmegaConf:
    from hydra.types import RunMode

    entries = None
    if members is not None:
        entries = json.dumps([{"values": {"seed": i}, "subdir": m} for i, m in enumerate(members)])
    return OmegaConf.create(
        {
            "mode": RunMode.MULTIRUN,
            "sweep": {"dir": str(sweep_dir)},
            "sweeper": {"pack_members": entries},
            "job": {"num": number},
            "runtime": {"output_dir": str(sweep_dir / (members[0] if members else "solo"))},
        }
    )


def test_a_packs_job_names_its_runs_and_their_numbers(tmp_path):
    SweepReport.write_plan(tmp_path, runs=5, workers=1, skipped=[], jobs=[1, 4])
    line = SweepReport.progress_line(pack_hydra(tmp_path, 1, ["a", "b", "c", "d"]))
    assert line == "sweep: runs 2–5 of 5 (a pack of 4: a … d)"


def test_the_time_left_shares_a_packs_wall_time_among_its_members(tmp_path):
    SweepReport.write_plan(tmp_path, runs=6, workers=1, skipped=[], jobs=[2, 2, 2])
    first = pack_hydra(tmp_path, 0, ["a", "b"])
    SweepReport.record(first, None)
    records = sorted((tmp_path / SweepReport.RECORDS).glob("[0-9]*.json"))
    assert [p.name for p in records] == ["0.json", "1.json"]  # one per member
    for path in records:  # the pack took 60 s: 30 s a run
        path.write_text(json.dumps({**json.loads(path.read_text()), "wall_s": 60.0, "pack": 2}))
    line = SweepReport.progress_line(pack_hydra(tmp_path, 1, ["c", "d"]))
    # 30 s × 4 runs not finished / 1 job at a time
    assert line == "sweep: runs 3–4 of 6 (a pack of 2: c, d); 2 finished, ≈ 2m00s left"


def test_a_packs_estimate_is_its_steps_times_one_pack_step(tmp_path):
    from lengen.progress import Estimate

    path, machine = tmp_path / "timings.json", "cpu · test"
    estimate = Estimate(path, machine, "cpu")
    estimate.record(1e9, 0.1, 1e9, 2.0, "t", 3.0)  # a single run: 0.1 s a step
    estimate.record(1e9, 0.4, 1e9, 2.0, "t", 3.0, members=8)  # a pack of 8: 0.4 s a step
    line = Estimate(path, machine, "cpu").line(1000, 1e9, 1e9, "t", members=8)
    # 3 s start-up + 1,000 × 0.4 s + 8 members' evaluations of 2 s: 419 s, not 8 × 105 s
    assert line.startswith("estimate: ≈ 6m59s for the pack of 8 runs (1,000 steps × 0.4 s a pack")


# -- one real sweep ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """``train.py -m seed=0,1,2 hydra.sweeper.pack=2``: a pack of seeds 0 and 1, seed 2 alone;
    then the same command again with resume=auto. -> (first, again, sweep folder)."""
    folder = tmp_path_factory.mktemp("packs") / "sweep"
    command = ("-m", "seed=0,1,2", f"{PACK_KEY}=2", *FAST, f"hydra.sweep.dir={folder}")
    first = run_train(*command, one_thread=True)
    again = run_train(*command, "resume=auto", one_thread=True) if first.returncode == 0 else None
    return SimpleNamespace(first=first, again=again, folder=folder)


def test_a_pack_sweep_trains_each_member_into_its_own_run_directory(sweep):
    assert sweep.first.returncode == 0, sweep.first.stderr[-3000:]
    assert "sweep: 3 runs in 1 pack and 1 single run, one after another" in sweep.first.stdout
    assert "sweep: 3 runs (3 trained)" in sweep.first.stdout
    runs = sorted(p for p in sweep.folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert [p.name.rpartition("_")[0] for p in runs] == [
        f"copy_decoder_rope_len4_seed{seed}" for seed in (0, 1, 2)
    ]
    packs = [json.loads((p / "results.json").read_text()).get("pack") for p in runs]
    names = [p.name for p in runs[:2]]
    assert packs == [
        {"size": 2, "index": 0, "members": names},
        {"size": 2, "index": 1, "members": names},
        None,
    ]


def test_every_member_has_its_own_train_log_as_a_solo_run(sweep):
    assert sweep.first.returncode == 0, sweep.first.stderr[-3000:]
    runs = sorted(p for p in sweep.folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    # Hydra's job log is the pack job's folder's (the first member's); the others get their own
    assert [(p / "train.log").is_file() for p in runs] == [True, True, True]


def test_a_pack_prints_its_estimate_before_training(sweep):
    lines = sweep.first.stdout.splitlines()
    estimates = [line for line in lines if line.startswith("estimate:")]
    assert any("for the pack of 2 runs" in line for line in estimates), estimates


def test_each_job_counts_the_runs_it_trains(sweep):
    lines = sweep.first.stdout.splitlines()
    assert any(line.startswith("sweep: runs 1–2 of 3 (a pack of 2: ") for line in lines)
    assert any(
        line.startswith("sweep: run 3 of 3 (copy_decoder_rope_len4_seed2_") for line in lines
    )


def test_aggregation_loads_a_packs_members_as_runs(sweep):
    from lengen.aggregate import load_sweep

    frame = load_sweep(sweep.folder)
    assert sorted(set(frame["seed"])) == [0, 1, 2]
    assert set(frame["status"]) <= {"ok", "not_learned"}


def test_the_sweep_run_again_with_resume_auto_finds_every_member_finished(sweep):
    assert sweep.again is not None and sweep.again.returncode == 0, sweep.again.stderr[-3000:]
    assert "sweep: 3 runs (3 finished earlier)" in sweep.again.stdout


def test_a_pack_sweep_stopped_by_sigterm_continues_its_pack_with_resume_auto(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import ROOT

    folder = tmp_path / "sweep"
    # long enough that SIGTERM at the first checkpoints finds training running (a checkpoint
    # every 2 steps slows it), short enough to finish soon after
    long = ("trainer.max_steps=60", "trainer.val_check_interval=30")
    long += ("trainer.checkpoint_every_n_steps=2",)
    command = [sys.executable, str(ROOT / "train.py"), "-m", "seed=0,1", f"{PACK_KEY}=2"]
    command += [*FAST, *long, f"hydra.sweep.dir={folder}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sweep = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(folder.glob("*/checkpoints/last.ckpt"))) < 2:  # both members saved once
            assert sweep.poll() is None and time.monotonic() < deadline, "no checkpoints"
            time.sleep(0.2)
        sweep.send_signal(signal.SIGTERM)
        sweep.communicate(timeout=240)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 128 + signal.SIGTERM
    assert not list(folder.glob("*/results.json"))  # stopped mid-pack: both interrupted
    again = run_train(*command[2:], "resume=auto", one_thread=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "sweep: 2 runs (2 continued from a checkpoint)" in again.stdout


# -- the benchmark, at a tiny size (it times nothing here) -------------------------------------------
def test_the_pack_benchmark_trains_both_ways_and_writes_what_it_measured(tmp_path):
    from helpers import load_script

    tiny = [
        "model.d_model=16",
        "model.n_layers=1",
        "model.n_heads=2",
        "model.d_ff=32",
        "data.len=4",
    ]
    path = tmp_path / "pack.json"
    arguments = ["--members", "2", "--steps", "2", "--repeats", "1", "--threads", "1"]
    load_script("bench_pack").main([*arguments, *(f"--set={o}" for o in tiny), "--json", str(path)])
    written = json.loads(path.read_text())
    assert [r["runs"] for r in written["raw"]["pack"] + written["raw"]["solo"]] == [2, 2]
    assert written["machine"]["threads"] == 1 and written["repeats"] == 1
    assert {"pack_total_ratio", "runs_per_hour_ratio", "memory_per_member_mib", "met"} <= set(
        written
    )


def test_log_records_during_a_pack_reach_every_members_train_log(tmp_path):
    import logging

    from lengen.pack.engine import member_logs

    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    with member_logs(folders):
        logging.getLogger("lengen.test").warning("a line for every member")
    logging.getLogger("lengen.test").warning("after the pack: nobody's")
    logs = [(folder / "train.log").read_text() for folder in folders]
    assert all("a line for every member" in log and "nobody's" not in log for log in logs)


def test_a_members_train_log_keeps_out_routine_lines_as_a_solo_runs(tmp_path, monkeypatch):
    import logging

    from lengen.logs import VERBOSE_VARIABLE
    from lengen.pack.engine import member_logs

    monkeypatch.delenv(VERBOSE_VARIABLE, raising=False)
    folder = tmp_path / "a"
    folder.mkdir()
    lightning = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    level = lightning.level
    lightning.setLevel(logging.INFO)
    try:
        with member_logs([folder]):
            lightning.info("GPU available: False, used: False")
            logging.getLogger("lengen.test").warning("a line of lengen's own")
    finally:
        lightning.setLevel(level)
    log = (folder / "train.log").read_text()
    assert "a line of lengen's own" in log and "GPU available" not in log


def test_a_pack_that_cannot_fit_in_memory_is_refused_naming_the_pack_key(monkeypatch):
    from hydra import compose

    from lengen.preflight import resources
    from lengen.preflight.sizes import TRAINING_BYTES, model_sizes

    with composing([CONFIG_DIR]):
        cfg = compose("train", overrides=["trainer.accelerator=cpu", *FAST])
    sizes = model_sizes(cfg, 1)
    weights = TRAINING_BYTES * sum(sizes.parameters.values())
    # one run fits, with room for two more members' weights: not for four members' (four seeds,
    # not eight: each job of the sweep is composed and sized, twice)
    room = sum(sizes.training.values()) + 2 * weights
    monkeypatch.setattr(resources, "available_memory", lambda cfg: (room, "CPU"))
    sweep = ["-m", "seed=0,1,2,3", "trainer.accelerator=cpu", *FAST]
    precheck([*sweep, f"{PACK_KEY}=3"])  # 3 members: fits
    with pytest.raises(ConfigError, match=rf"^{PACK_KEY}: a pack of 4 runs needs about"):
        precheck([*sweep, f"{PACK_KEY}=4"])
