"""scripts/trials/rerun_hostile_extra.py: the comparison of two finished runs, and actions fired
on an output line (shell commands only here; nothing is trained)."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys

import pytest

from helpers import ROOT

ROW = {"length": 8, "protocol": "teacher_forced", "accuracy": 0.5, "seconds": 1.0, "peak_mem_mb": 3}
RESULTS = {
    "pe": "rope",
    "eval": [ROW],
    "validation": {"val/loss": 2.5},
    "attention_diagnostics": {"samples": 4},
    "accuracy_by_answer_position": {"train_len": 16},
    "provenance": {"command": "train.py"},
    "resumed": False,
}
METRICS = "epoch,step,train/loss\n0,4,2.9\n0,9,2.8\n"


@pytest.fixture(scope="module")
def extra():
    """The script as a registered module (its dataclasses look their module up)."""
    path = ROOT / "scripts" / "trials" / "rerun_hostile_extra.py"
    spec = importlib.util.spec_from_file_location("trials_rerun_hostile_extra", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def write_run(path, results, metrics=METRICS):
    (path / "logs").mkdir(parents=True)
    (path / "results.json").write_text(json.dumps(results))
    (path / "logs" / "metrics.csv").write_text(metrics)
    return path


def test_compare_leaves_timings_and_provenance_out(extra, tmp_path):
    resumed = copy.deepcopy(RESULTS)
    resumed["eval"][0].update(seconds=9.0, peak_mem_mb=99)
    resumed.update(provenance={"command": "train.py resume=auto"}, resumed=True)
    out = extra.compare(write_run(tmp_path / "a", RESULTS), write_run(tmp_path / "b", resumed))
    assert {k for k, v in out.items() if not v.startswith("identical")} == set()


def test_compare_names_a_differing_row(extra, tmp_path):
    other = copy.deepcopy(RESULTS)
    other["eval"][0]["accuracy"] = 0.25
    out = extra.compare(write_run(tmp_path / "a", RESULTS), write_run(tmp_path / "b", other))
    assert out["rows"] == "differs"


def test_compare_names_a_missing_metrics_row(extra, tmp_path):
    out = extra.compare(
        write_run(tmp_path / "a", RESULTS),
        write_run(tmp_path / "b", RESULTS, metrics="epoch,step,train/loss\n0,4,2.9\n"),
    )
    assert out["metrics.csv"].startswith("differs (2 vs 1 rows")


def scenario(extra, *steps):
    return extra.Scenario("T", "T", "a test", list(steps))


def test_action_fires_on_a_line(extra, tmp_path):
    step = extra.Step("s", "echo ready; sleep 60", shell=True, on=(r"^ready$", "TERM"))
    (record,) = extra.run_scenario(scenario(extra, step), str(tmp_path), str(ROOT), "python", 50)
    assert (record["exit"], record["fired_at"]) == (-15, "ready")


def test_an_action_whose_line_never_came_is_said(extra, tmp_path):
    step = extra.Step("s", "echo other", shell=True, on=(r"^ready$", "TERM"))
    (record,) = extra.run_scenario(scenario(extra, step), str(tmp_path), str(ROOT), "python", 50)
    assert record["fired_at"].startswith("never")


def test_every_compared_folder_is_written_by_a_step(extra):
    for s in extra.SCENARIOS.values():
        written = {m for step in s.steps for m in re.findall(r"\$W/([\w/]+)", step.command)}
        assert {d for pair in s.compare for d in pair} <= written, s.id


def test_a_file_moment_fires_once_the_file_exists(extra, tmp_path):
    step = extra.Step("s", "sleep 0.3; touch m; sleep 60", shell=True, on=("file:m", "TERM"))
    (record,) = extra.run_scenario(scenario(extra, step), str(tmp_path), str(ROOT), "python", 50)
    assert (record["exit"], record["fired_at"].split(" at ")[0]) == (-15, "file:m")


def test_compare_leaves_the_cache_hit_out(extra, tmp_path):
    first = {**RESULTS, "data": {"cache": {"key": "k", "hit": False, "tokenizer_hit": False}}}
    second = {**RESULTS, "data": {"cache": {"key": "k", "hit": True, "tokenizer_hit": True}}}
    out = extra.compare(write_run(tmp_path / "a", first), write_run(tmp_path / "b", second))
    assert out["other keys"] == "identical"


def test_a_file_moment_waits_for_every_file(extra, tmp_path):
    step = extra.Step(
        "s", "touch a; sleep 0.5; touch b; sleep 60", shell=True, on=("file:a&b", "TERM")
    )
    (record,) = extra.run_scenario(scenario(extra, step), str(tmp_path), str(ROOT), "python", 50)
    assert float(record["fired_at"].split(" at ")[1].split()[0]) >= 0.5
