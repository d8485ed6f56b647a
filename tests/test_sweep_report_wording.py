"""The sweep report's count line says "1 run", not "1 runs" (issue #51's remarks: SN27a/b,
SN28a)."""

from __future__ import annotations

import json

import pytest

from lengen.cli import SweepReport


def test_a_sweep_of_one_run_is_reported_as_1_run(tmp_path, capsys):
    records = tmp_path / SweepReport.RECORDS
    records.mkdir()
    record = {"run_dir": str(tmp_path / "r"), "outcome": "refused: pe.base=-1"}
    (records / "0.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit):  # a refused job: the sweep exits 1
        SweepReport().report(tmp_path)
    assert f"sweep: 1 run (1 refused) in {tmp_path}" in capsys.readouterr().out
