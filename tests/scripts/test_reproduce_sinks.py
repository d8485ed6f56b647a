"""scripts/reproduce_sinks_by_encoding.sh (docs/reproductions.md (k)): the jobs it runs, its
refusal, its dry run, and its per-arm table of Gu et al.'s sink rate at 64 tokens (mean ± 95%
t half-width over seeds beside the uniform-attention baseline), with a stand-in python that
writes ``train.py`` calls down and runs only the script's own inline Python."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from helpers import ROOT

SCRIPT = ROOT / "scripts" / "reproduce_sinks_by_encoding.sh"
ENCODINGS = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope")
OPTIONS = ("model.kv_bias", "model.attn_sinks", "model.attn_fn")


def run_script(tmp_path, sweep, inline: bool = True, **env: str):
    """(the recorded ``train.py`` calls as argument lists, the script's process): the stand-in
    python records every call; the script's inline Python (``python -``: the table, the dry
    run's estimate) it runs where ``inline``, else skips."""
    log, fake = tmp_path / "calls", tmp_path / "python"
    run_inline = f'exec "{sys.executable}" "$@"' if inline else "exit 0"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = "-" ]; then {run_inline}; fi\n'
        f'printf "%s\\037" "$@" >> "{log}"\necho >> "{log}"\n'
    )
    fake.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPT), str(sweep)], cwd=ROOT,
                          env={**os.environ, "PYTHON": str(fake), **env},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split("\037")[:-1] for line in lines], done


def jobs(calls: list[list[str]]) -> list[frozenset]:
    """The (key, value) pairs that say what each job trains, expanded as Hydra's sweeper does."""
    found = []
    for arguments in calls:
        if arguments[:2] != ["train.py", "-m"]:  # the sweep's aggregation
            continue
        overrides = OverridesParser.create().parse_overrides(arguments[2:])
        for job in BasicSweeper.split_arguments(overrides, None)[0]:
            parsed = OverridesParser.create().parse_overrides(job)
            found.append(frozenset((o.key_or_group, o.value()) for o in parsed
                                   if not o.key_or_group.startswith("hydra")
                                   and o.key_or_group != "resume"))  # fmt: skip
    return found


def test_the_recipe_runs_nine_arms_of_three_seeds_once_each(tmp_path):
    calls, _ = run_script(tmp_path, tmp_path / "sweep", inline=False)
    found = jobs(calls)
    assert len(found) == len(set(found)) == 27
    arms = {frozenset(p for p in job if p[0] not in ("seed", "experiment")) for job in found}
    expected = {frozenset({("pe", pe)}) for pe in ENCODINGS}
    expected |= {frozenset({("pe", "rope"), (key, value)}) for key, value in
                 zip(OPTIONS, (True, True, "sigmoid"), strict=True)}  # fmt: skip
    assert arms == expected
    assert {dict(job)["experiment"] for job in found} == {"sinks_small"}


def test_an_unknown_option_is_refused_in_one_line_and_nothing_runs(tmp_path):
    calls, done = run_script(tmp_path, tmp_path / "sweep", inline=False, OPTIONS="kv_bias gates")
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().splitlines() == [
        "error: OPTIONS: unknown option 'gates'; allowed: kv_bias, attn_sinks, sigmoid"
    ]


def test_a_dry_run_trains_nothing_and_prints_the_commands(tmp_path):
    calls, done = run_script(tmp_path, tmp_path / "sweep", DRY="1", ENCODINGS="rope",
                             OPTIONS="sigmoid", SEEDS="0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert calls == []
    printed = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    assert len(printed) == 4 and printed[1].endswith("pe=rope model.attn_fn=sigmoid")
    assert printed[2].endswith(f"scripts/aggregate.py {tmp_path / 'sweep'} --metric ppl")
    assert "sweep: 2 runs" in done.stdout and not (tmp_path / "sweep").exists()


def _finished_run(sweep, name: str, model: dict, seed: int, rate: float, ppl: float) -> None:
    run = sweep / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"pe": {"name": "rope"}, "model": model,
                                                     "seed": seed}))  # fmt: skip
    section = {"lengths": {"64": {"tokens": 64, "sink_rate": rate, "layers": {}}}}
    rows = [{"length": 64, "ppl": ppl + 1}, {"length": 128, "ppl": ppl}]
    (run / "results.json").write_text(json.dumps({"eval": rows, "attention_diagnostics": section}))


def test_the_table_gives_each_arms_mean_and_t_interval_beside_the_baseline(tmp_path):
    sweep = tmp_path / "sweep"
    for seed, rate in enumerate([0.1, 0.2, 0.3]):
        _finished_run(sweep, f"rope_{seed}", {"attn_fn": "softmax"}, seed, rate, 50.0 + seed)
    _finished_run(sweep, "sigmoid_0", {"attn_fn": "sigmoid"}, 0, 0.0, 60.0)
    _, done = run_script(tmp_path, sweep, ENCODINGS="", OPTIONS="")
    assert done.returncode == 0, done.stderr
    rows = {row["arm"]: row for row in csv.DictReader((sweep / "sinks.csv").open())}
    # mean 20 %, sd 10 %: half-width t_{0.975, 2} · 10 / √3 = 4.303 · 5.774 = 24.84
    assert rows["rope"]["sink_rate_pct"] == "20.0" and rows["rope"]["ci95_half_width"] == "24.84"
    assert rows["rope"]["ppl_at_128"] == "51.0" and rows["rope"]["gu_et_al"].startswith("18.18")
    assert (
        rows["rope + sigmoid"]["seeds"] == "1" and rows["rope + sigmoid"]["ci95_half_width"] == ""
    )
    table = (sweep / "sinks.md").read_text()
    assert "| uniform attention (baseline) | – | 0.00 |" in table and "α = 0.074" in table


def test_a_sweep_without_a_sink_rate_at_64_is_refused_in_one_line(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _, done = run_script(tmp_path, sweep, ENCODINGS="", OPTIONS="")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"error: {sweep}: no finished run with a sink rate at 64 tokens"
    ]
    assert not (sweep / "sinks.csv").exists()


@pytest.mark.parametrize("variable", ["ENCODINGS", "OPTIONS"])
def test_an_empty_list_leaves_its_arms_out(variable, tmp_path):
    calls, _ = run_script(tmp_path, tmp_path / "sweep", inline=False, **{variable: ""})
    assert len(jobs(calls)) == (27 - 18 if variable == "ENCODINGS" else 18)
