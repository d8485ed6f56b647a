"""lengen.measure: time, peak memory, batch sizes from a token budget, out-of-memory halving."""

from __future__ import annotations

import time

import pytest
import torch

from lengen import measure as measure_module
from lengen.measure import (
    Measurement,
    batch_size_for,
    is_out_of_memory,
    measure,
    run_with_oom_halving,
)

MIB = 1 << 20


def has_vm_hwm() -> bool:
    with measure("cpu") as probe:
        pass
    return probe.memory_source == "vm_hwm"


needs_vm_hwm = pytest.mark.skipif(not has_vm_hwm(), reason="needs Linux /proc/self/clear_refs")


def test_measure_times_the_block():
    with measure("cpu") as cost:
        time.sleep(0.05)
    assert 0.05 <= cost.seconds < 10.0  # the sleep, not a speed claim: generous for busy CI


@needs_vm_hwm
def test_cpu_peak_sees_a_transient_tensor():
    # 256 MiB allocated, written (so resident) and freed inside the block
    with measure("cpu") as cost:
        block = torch.ones(64 * MIB, dtype=torch.float32)
        del block
    assert 240 <= cost.peak_mem_mb <= 300


@needs_vm_hwm
def test_cpu_peak_ignores_memory_held_before_the_block():
    held = torch.ones(64 * MIB, dtype=torch.float32)  # 256 MiB already resident
    with measure("cpu") as cost:
        small = torch.ones(1024) * 2
    del held, small
    assert cost.peak_mem_mb < 32


def test_measurement_row_keys():
    row = Measurement(seconds=1.234567, peak_mem_mb=12.345, memory_source="vm_hwm").as_row()
    assert row == {"seconds": 1.2346, "peak_mem_mb": 12.3}


def test_ru_maxrss_fallback_reports_its_source(monkeypatch):
    monkeypatch.setattr(measure_module, "_reset_peak_rss", lambda: False)
    with measure("cpu") as cost:
        pass
    assert cost.memory_source == "ru_maxrss" and cost.peak_mem_mb >= 0


def out_of_memory_above(limit: int, error: Exception):
    calls = []

    def evaluate(batch_size: int) -> str:
        calls.append(batch_size)
        if batch_size > limit:
            raise error
        return f"done at {batch_size}"

    return evaluate, calls


def test_oom_halves_until_the_batch_fits():
    evaluate, calls = out_of_memory_above(3, torch.OutOfMemoryError("CUDA out of memory"))
    assert run_with_oom_halving(evaluate, 12) == ("done at 3", 3)
    assert calls == [12, 6, 3]


def test_cpu_allocation_failure_counts_as_out_of_memory():
    with pytest.raises(RuntimeError) as failed:
        torch.empty(1 << 50, dtype=torch.uint8)  # 1 PiB: the CPU allocator refuses
    assert is_out_of_memory(failed.value)
    evaluate, calls = out_of_memory_above(1, failed.value)
    assert run_with_oom_halving(evaluate, 4) == ("done at 1", 1)
    assert calls == [4, 2, 1]


def test_other_errors_are_not_retried():
    evaluate, calls = out_of_memory_above(0, ValueError("eval.samples must be positive"))
    with pytest.raises(ValueError, match="eval.samples"):
        run_with_oom_halving(evaluate, 8)
    assert calls == [8]


def test_oom_at_the_smallest_batch_propagates():
    evaluate, calls = out_of_memory_above(0, torch.OutOfMemoryError("CUDA out of memory"))
    with pytest.raises(torch.OutOfMemoryError):
        run_with_oom_halving(evaluate, 8, min_batch_size=2)
    assert calls == [8, 4, 2]


@pytest.mark.parametrize(
    ("length", "expected"), [(128, 64), (8192, 8), (65536, 1), (1 << 20, 1), (1000, 64), (3000, 21)]
)
def test_batch_size_from_a_token_budget(length, expected):
    assert batch_size_for(length, token_budget=65536, max_batch_size=64) == expected


def test_batch_size_rejects_a_zero_budget():
    with pytest.raises(ValueError, match="token_budget"):
        batch_size_for(128, token_budget=0, max_batch_size=8)
