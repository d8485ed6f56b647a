"""Accuracy by depth: exactness grouped by where an instance hides its answer (the run that writes
the report end to end: tests/data/test_tasks.py)."""

from __future__ import annotations

import json

import torch

from helpers import task_data
from lengen.data.task_data import N_SPECIAL
from lengen.evaluation.by_depth import depth_report, write_depth_report


class HalfOracle(torch.nn.Module):
    """An encoder-decoder "model" that answers passkey right exactly when the key sits in the
    first half of the input."""

    def __init__(self, task):
        super().__init__()
        self.task = task
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the model a device

    def forward(self, src, tgt):
        inputs = src - N_SPECIAL
        answer = self.task.solve(inputs) + N_SPECIAL  # (B, m)
        wrong = (self.task.depth(inputs) >= 0.5)[:, None]
        answer = torch.where(wrong, (answer + 1) % (N_SPECIAL + self.task.n_symbols), answer)
        return torch.nn.functional.one_hot(answer, N_SPECIAL + self.task.n_symbols).float()


def test_depth_report_groups_exactness_by_depth_bin(tmp_path):
    data = task_data("passkey", len=16, model_kind="encoder_decoder")
    report = depth_report(HalfOracle(data.task), data, [16, 26], samples=200, bins=5)
    write_depth_report(report, tmp_path, ".probe")
    assert json.loads((tmp_path / "accuracy_by_depth.probe.json").read_text()) == report
    assert (tmp_path / "accuracy_by_depth.probe.png").stat().st_size > 0
    for length in (16, 26):
        rows = [row for row in report["rows"] if row["length"] == length]
        assert [row["depth_bin"] for row in rows] == [0, 1, 2, 3, 4]
        assert sum(row["n_examples"] for row in rows) == 200
        exact = [row["exact_match"] for row in rows]
        assert exact[:2] == [1.0, 1.0] and exact[3:] == [0.0, 0.0]
        assert 0.0 < exact[2] < 1.0  # the bin 0.4–0.6 straddles the oracle's boundary
