"""The sweep's report trusts each job's own word (its ``.jobs/<n>.json`` record), never the
count of folders: two jobs given one folder, where the first finished, must not make the
second's refusal or failure a success (issue #51 item 1: SW9, SN29)."""

from __future__ import annotations

import json

from test_cluster import report


def record(sweep_dir, number: int, folder: str, outcome: str | None, overrides: list[str]):
    """Job ``number``'s record naming run folder ``folder`` (made if missing)."""
    from lengen.cli import SweepReport

    run_dir = sweep_dir / folder
    run_dir.mkdir(parents=True, exist_ok=True)
    records = sweep_dir / SweepReport.RECORDS
    records.mkdir(exist_ok=True)
    entry = {"run_dir": str(run_dir), "outcome": outcome, "overrides": overrides}
    (records / f"{number}.json").write_text(json.dumps(entry))
    return run_dir


def shared_folder(tmp_path, second: str):
    """Job 0 trained into folder ``same``; job 1, given the same folder, said ``second``."""
    run_dir = record(tmp_path, 0, "same", "trained", ["seed=0"])
    (run_dir / "results.json").write_text('{"resumed": false}')
    record(tmp_path, 1, "same", second, ["seed=1"])


def test_a_job_refused_in_a_folder_another_job_finished_is_counted_refused(tmp_path):
    shared_folder(tmp_path, "refused: hydra.run.dir=… already holds a finished run")
    status, out, _ = report(tmp_path)
    assert status == 1 and "sweep: 2 runs (1 trained, 1 refused)" in out


def test_a_job_that_failed_in_a_finished_folder_is_counted_failed(tmp_path):
    shared_folder(tmp_path, "failed: training diverged at step 1")
    status, out, _ = report(tmp_path)
    assert status == 1 and "(1 trained, 1 failed)" in out


def test_jobs_sharing_a_folder_are_each_named_by_their_overrides(tmp_path):
    shared_folder(tmp_path, "refused: already holds a finished run")
    _, _, err = report(tmp_path)
    assert "  same (seed=1): refused: already holds a finished run" in err


def test_an_interrupted_jobs_word_is_not_overruled_by_results_in_its_folder(tmp_path):
    shared_folder(tmp_path, "interrupted: interrupted by SIGTERM at step 3")
    status, out, _ = report(tmp_path)
    assert status == 1 and "(1 trained, 1 interrupted)" in out
