"""Step-interleaved training throughput: one lengen step, one plain step, on the same batch.

    python scripts/bench.py --interleave --impls lengen,plain --no-eval --steps 200

bench.py's default rows time lengen and the plain loop in blocks, one after the other; on a
shared machine the load changes between blocks, and a row's ratio swung by ±20 % between runs
(docs/benchmarks.md "Training throughput"). Here both train at once in one process: lengen
through its real path (``LitModel`` + ``DataModule`` in a Lightning ``Trainer``) and, from a
callback, the plain loop (``bench_peers.plain_step``) on the batch lengen was given, so each
pair of steps sees the same load. Every step gives one ratio, the plain step's time over
lengen's (lengen's throughput over plain's); the report is their median and interquartile
range (``summary``), which a burst of load in one step cannot move.

Bookkeeping (``Interleaver``): the clock is read at each lengen step's start (a "mark"); the
window between two marks holds lengen's step, Lightning's work between steps and the plain
step(s) run in it, whose own time is subtracted, so lengen's time keeps every host cost of its
path. The plain step runs after lengen's step on even steps and before it on odd ones (just
before the mark), so neither side always finds the caches the other warmed. On a GPU the clock
synchronises (``gpu_clock``): a per-step time needs it, and it costs both sides alike.
"""

from __future__ import annotations

import statistics
import time

import pytorch_lightning as pl
import torch

from bench_peers import PlainLM, gpu_clock, plain_step


def summary(lengen: list[float], plain: list[float]) -> dict:
    """Paired step times -> their medians and the per-step ratio plain / lengen (lengen's
    throughput over plain's): median and quartiles."""
    ratios = [p / max(g, 1e-12) for g, p in zip(lengen, plain, strict=True)]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {
        "pairs": len(ratios),
        "lengen_step_ms_median": round(1000 * statistics.median(lengen), 3),
        "plain_step_ms_median": round(1000 * statistics.median(plain), 3),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_q1": round(q1, 4),
        "ratio_q3": round(q3, 4),
        "ratio_iqr": round(q3 - q1, 4),
    }


def target_line(name: str, row: dict, goal: float) -> str:
    """The issue's throughput target read from the paired ratios."""
    mark = "ok" if row["ratio_median"] >= goal else "MISSED"
    return (
        f"train {name:>10}: lengen / plain interleaved = {row['ratio_median']:.2f} "
        f"(IQR {row['ratio_q1']:.2f}-{row['ratio_q3']:.2f}, {row['pairs']} pairs) "
        f"(>= {goal}) {mark}"
    )


def interleaved(name: str, warmup: int, steps: int, device, fit, sizes: dict):
    """(lengen's, plain's) seconds of each of ``steps`` steps after ``warmup``, alternating step
    by step on the same batches; ``fit(name, max_steps, callbacks)``: bench.py's lengen path,
    ``sizes``: its SIZES (the plain model's)."""
    from lengen.lit import quiet_known_noise

    quiet_known_noise()
    paired = interleaver(name, warmup, device, sizes)
    fit(name, warmup + steps, [paired])
    lengen, plain = paired.lengen, paired.plain_times
    row = summary(lengen, plain)
    print(f"  {target_line(name, row, 0.0).rsplit(' (>=', 1)[0]}", flush=True)
    return lengen, plain


def interleaver(name: str, warmup: int, device, sizes: dict, clock=None):
    """An ``Interleaver`` with the plain model of ``name`` (bench_peers.PlainLM at ``sizes``)."""
    torch.manual_seed(0)
    model = PlainLM(
        name, sizes["vocab"], sizes["d_model"], sizes["n_layers"], sizes["n_heads"],
        sizes["d_ff"], sizes["seq"],
    ).to(device).train()  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)

    def step(inputs, targets) -> None:
        plain_step(model, optimizer, lambda m, t: m(t), inputs, targets)

    if clock is None:
        clock = gpu_clock if device.type == "cuda" else time.perf_counter
    return Interleaver(step, warmup, clock)


class Interleaver(pl.Callback):
    """A Lightning callback that runs ``plain(inputs, targets)`` once per lengen step on that
    step's batch and keeps both times of each step from ``warmup`` on (``lengen``, ``plain``:
    seconds, one per step, paired by index); the module docstring says how."""

    def __init__(self, plain, warmup: int, clock=time.perf_counter) -> None:
        self.plain, self.warmup, self.clock = plain, warmup, clock
        self.lengen: list[float] = []
        self.plain_times: list[float] = []
        self.batches = 0  # plain steps run (one per lengen batch)
        self._mark = None  # (step, clock) at the current lengen step's start
        self._inside = 0.0  # plain seconds run since that mark (subtracted from lengen's)
        self._plain_of: dict[int, float] = {}  # step -> its plain step's seconds

    def _run_plain(self, step: int, batch) -> float:
        started = self.clock()
        self.plain(batch["inputs"]["tokens"], batch["targets"])
        seconds = self.clock() - started
        self._plain_of[step] = seconds
        self.batches += 1
        return seconds

    def _close(self, now: float) -> None:
        """The window since the last mark: lengen's step, less the plain time run in it."""
        if self._mark is None:
            return
        step, started = self._mark
        if step >= self.warmup:
            self.lengen.append(now - started - self._inside)
            self.plain_times.append(self._plain_of[step])
        self._plain_of.pop(step, None)
        self._mark, self._inside = None, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % 2:  # odd steps: plain first, in the window still open (then subtracted)
            self._inside += self._run_plain(step, batch)
        now = self.clock()
        self._close(now)
        self._mark = (step, now)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = self._mark[0]  # global_step has already counted this step
        if step % 2 == 0:  # even steps: plain after lengen's step
            self._inside += self._run_plain(step, batch)

    def on_train_end(self, trainer, pl_module) -> None:
        self._close(self.clock())
