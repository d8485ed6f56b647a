"""Every evaluation row records its cost, and an out-of-memory error halves the batch instead of
ending the run."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_train
from lengen.evaluate import evaluate
from lengen.train import build


@pytest.fixture(scope="module")
def task_model():
    cfg = compose_train("data.len=4", "model.d_model=32", "model.n_layers=1")
    data, model, _ = build(cfg)
    return data, model


class OutOfMemoryAbove(torch.nn.Module):
    """Wraps a model; raises the CPU allocator's error for batches larger than ``limit``."""

    def __init__(self, model, limit):
        super().__init__()
        self.model, self.limit, self.batch_sizes = model, limit, []

    def forward(self, **inputs):
        size = next(iter(inputs.values())).shape[0]
        self.batch_sizes.append(size)
        if size > self.limit:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")
        return self.model(**inputs)


def test_task_rows_record_seconds_memory_and_batch_size(task_model, single_thread):
    data, model = task_model
    rows = evaluate(model, data, [4, 8], samples=16, max_tokens_per_batch=64, progress=False)
    for row in rows:
        assert row["seconds"] > 0 and row["peak_mem_mb"] >= 0
    # the budget of 64 tokens: 64 // 9 positions = 7 at length 4, 64 // 17 = 3 at length 8
    assert [row["batch_size"] for row in rows] == [7, 3]


def test_out_of_memory_halves_the_batch_and_scores_the_same(task_model, single_thread):
    data, model = task_model
    expected = evaluate(model, data, [8], samples=16, max_tokens_per_batch=10**6, progress=False)
    small = OutOfMemoryAbove(model, limit=5)
    rows = evaluate(small, data, [8], samples=16, max_tokens_per_batch=10**6, progress=False)
    assert small.batch_sizes[:3] == [16, 8, 4]  # 16 and 8 fail, 4 runs
    assert rows[0]["batch_size"] == 4
    for key in ("loss", "accuracy", "exact_match", "n_examples"):
        assert rows[0][key] == pytest.approx(expected[0][key], rel=1e-5)


def test_other_errors_are_not_retried(task_model, single_thread):
    data, model = task_model

    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.calls = 0

        def forward(self, **inputs):
            self.calls += 1
            raise RuntimeError("shape mismatch")

    broken = Broken()
    with pytest.raises(RuntimeError, match="shape mismatch"):
        evaluate(broken, data, [8], samples=16, progress=False)
    assert broken.calls == 1
