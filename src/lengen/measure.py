"""Time, peak memory and out-of-memory retries for long evaluations (and ``scripts/bench.py``).

Three small pieces, used together by an evaluation loop::

    batch_size = batch_size_for(length, token_budget=65536, max_batch_size=64)
    with measure(device) as cost:
        rows, batch_size = run_with_oom_halving(lambda b: evaluate_at(length, b), batch_size)
    row.update(cost.as_row(), batch_size=batch_size)   # seconds, peak_mem_mb, batch_size

Peak memory is the growth over what was in use when the block started, in MiB (2^20 bytes):
what the measured work itself needed on top of the model and data already there.

* CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` (tensors only,
  not the allocator's cache).
* CPU on Linux: torch has no CPU allocator statistics, and ``tracemalloc`` does not see torch's
  allocations. The kernel keeps the process's peak resident set (``VmHWM`` in
  /proc/self/status) and resets it to the current size when "5" is written to
  /proc/self/clear_refs (Linux >= 4.0), so the peak resident growth is exact to the page. It
  counts the whole process (other threads included) and only memory the allocator actually
  took from the system: blocks reused from freed heap memory do not show. So the block starts
  by handing freed heap memory back to the system (glibc's ``malloc_trim``); without it, a
  process that trained first (heap full of freed activations) measured 0 MiB at 8,192 tokens.
* Elsewhere (no writable clear_refs): ``ru_maxrss`` growth, which only moves when the process
  beats its own earlier peak: a lower bound, often 0. ``Measurement.memory_source`` says which
  was used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
MIB = 1 << 20

T = TypeVar("T")


@dataclass
class Measurement:
    """Filled in when the ``measure`` block exits."""

    seconds: float = float("nan")
    peak_mem_mb: float = float("nan")
    #: how memory was measured: ``cuda_max_allocated``, ``vm_hwm`` or ``ru_maxrss``
    memory_source: str = ""

    def as_row(self) -> dict:
        """The keys a results row carries: ``seconds`` and ``peak_mem_mb`` (rounded)."""
        return {"seconds": round(self.seconds, 4), "peak_mem_mb": round(self.peak_mem_mb, 1)}


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    return int(match.group(1)) if match else 0


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak resident set to the current one; False where not possible."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") <= _status_kib("VmRSS") + 4  # a page of slack


def _trim_heap() -> None:
    """Return freed heap memory to the system (glibc only; elsewhere nothing happens)."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def _max_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


@contextmanager
def measure(device: torch.device | str = "cpu") -> Iterator[Measurement]:
    """Wall-clock seconds and peak memory growth (MiB) of the block, on ``device``.

    CUDA work is synchronised at both ends so that the time covers the kernels."""
    device = torch.device(device)
    result = Measurement()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_allocated(device)
        result.memory_source = "cuda_max_allocated"
    elif _STATUS.exists() and (_trim_heap() or _reset_peak_rss()):
        baseline = _status_kib("VmRSS") * 1024
        result.memory_source = "vm_hwm"
    else:
        baseline = _max_rss_bytes()
        result.memory_source = "ru_maxrss"
    start = time.perf_counter()
    try:
        yield result
    finally:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        result.seconds = time.perf_counter() - start
        if result.memory_source == "cuda_max_allocated":
            peak = torch.cuda.max_memory_allocated(device)
        elif result.memory_source == "vm_hwm":
            peak = _status_kib("VmHWM") * 1024
        else:
            peak = _max_rss_bytes()
        result.peak_mem_mb = max(0, peak - baseline) / MIB


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA's ``torch.OutOfMemoryError``, or the RuntimeError a failed CPU allocation raises."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    message = str(error)
    return isinstance(error, RuntimeError) and (
        "out of memory" in message or "can't allocate memory" in message  # CPU allocator
    )


def run_with_oom_halving(
    fn: Callable[[int], T], batch_size: int, *, min_batch_size: int = 1
) -> tuple[T, int]:
    """``fn(batch_size)``, retried with half the batch after each out-of-memory error.

    Returns (fn's result, the batch size that succeeded). An error other than out-of-memory,
    or out-of-memory at ``min_batch_size``, propagates."""
    if batch_size < min_batch_size or min_batch_size < 1:
        raise ValueError(
            f"batch_size must be >= min_batch_size >= 1, got {batch_size} and {min_batch_size}"
        )
    while True:
        try:
            return fn(batch_size), batch_size
        except Exception as error:
            if not is_out_of_memory(error) or batch_size <= min_batch_size:
                raise
        # outside the except block: the traceback no longer pins the failed attempt's tensors
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        batch_size = max(min_batch_size, batch_size // 2)


def batch_size_for(length: int, *, token_budget: int, max_batch_size: int) -> int:
    """Sequences per batch at ``length`` so that a batch holds at most ``token_budget`` tokens
    (at least 1, at most ``max_batch_size``)."""
    if length < 1 or token_budget < 1 or max_batch_size < 1:
        raise ValueError(
            f"length, token_budget and max_batch_size must be >= 1, got {length}, "
            f"{token_budget} and {max_batch_size}"
        )
    return max(1, min(max_batch_size, token_budget // length))


def measured_with_oom_halving(
    fn: Callable[[int], T], batch_size: int, device, *, min_batch_size: int = 1
) -> tuple[T, dict]:
    """``fn(batch_size)``, retried with half the batch on out-of-memory, timed and measured ->
    (its result, the row keys ``seconds``, ``peak_mem_mb`` and ``batch_size`` (the one that
    ran)). Seconds and memory cover the attempts that ran out of memory too."""
    with measure(device) as cost:
        result, used = run_with_oom_halving(fn, batch_size, min_batch_size=min_batch_size)
    return result, {**cost.as_row(), "batch_size": used}
