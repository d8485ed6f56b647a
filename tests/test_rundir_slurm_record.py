"""lengen.rundir.rules.requeued_job: a run's ``.slurm_job`` record that is not text (a damaged
file) is no record of this job, not a traceback (issue #51 item 5: SL08)."""

from __future__ import annotations

from lengen.rundir.rules import SLURM_JOB, requeued_job


def test_a_record_of_bytes_that_are_no_text_is_not_this_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    (tmp_path / SLURM_JOB).write_bytes(b"\xff\xfe\x80garbage")
    assert requeued_job(tmp_path) is None
