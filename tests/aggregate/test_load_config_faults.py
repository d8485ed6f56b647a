"""lengen.aggregate.load: a config.yaml that no longer says what the run's results record
(cut to 40 bytes that still parse: the trial re-run's AN03 remark, issue #51) fails its run,
listed in failed.csv and the warning like the other damage."""

from __future__ import annotations

import csv

from lengen.aggregate import main
from lengen.aggregate.load import load_runs
from sweep_fixture import write_run

#: path's config.yaml in the re-run's damaged sweep, cut to 40 bytes
CUT = "pe:\n  randomized: false\n  max_position: "


def test_a_config_cut_short_fails_its_run_naming_the_missing_keys(tmp_path):
    run_dir = write_run(tmp_path, "r", accuracy={4: 1.0, 8: 0.5})
    (run_dir / "config.yaml").write_text(CUT)
    (run,) = load_runs(tmp_path, None, 0.9)
    assert (run.status, run.reason) == (
        "failed",
        "config.yaml has no pe.name, data.name, model.name, data.len, seed, which "
        "results.json records (cut short?)",
    )


def test_a_config_of_another_encoding_fails_its_run(tmp_path):
    run_dir = write_run(tmp_path, "r", pe="rope", accuracy={4: 1.0})
    text = (run_dir / "config.yaml").read_text().replace("name: rope", "name: alibi")
    (run_dir / "config.yaml").write_text(text)
    (run,) = load_runs(tmp_path, None, 0.9)
    assert run.reason == "config.yaml's pe.name=alibi but results.json records rope"


def test_a_config_cut_short_is_in_failed_csv_and_the_warning(tmp_path, capsys):
    write_run(tmp_path, "good", accuracy={4: 1.0, 8: 0.5})
    bad = write_run(tmp_path, "cut", seed=1, accuracy={4: 1.0, 8: 0.5})
    (bad / "config.yaml").write_text(CUT)
    main([str(tmp_path)])
    assert "cut" in capsys.readouterr().err.split("failed or missing run(s)")[1]
    with open(tmp_path / "failed.csv") as file:
        failed = {row["run_dir"]: row["reason"] for row in csv.DictReader(file)}
    assert failed["cut"].startswith("config.yaml has no pe.name")
