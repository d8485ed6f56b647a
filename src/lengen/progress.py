"""Progress that reads well where nobody watches: a line every N steps instead of bars.

On a terminal, Lightning's progress bars redraw one line in place with carriage returns. In a
file (a SLURM log, nohup.out, CI, ``> log.txt``) every redraw stays, and a run becomes one line
of thousands of characters. ``trainer.enable_progress_bar`` (``lengen.options``) chooses:

- ``true`` (the default): bars where stdout and stderr are both a terminal, lines elsewhere, and
  lines in the jobs of a parallel sweep (joblib, SLURM): several bars in one terminal garble;
- ``bar``: Lightning's bars whatever the output (a notebook, which is no terminal);
- ``lines``: a line every N steps whatever the output;
- ``false``: neither.

Only rank zero prints, as Lightning's bars do.

**How long, before it starts**: ``lengen.estimate`` (the machine's calibration, the estimate
line); its names are re-exported here, where callers have always imported them. ``StepTimer``
times the steps it calibrates with, and samples the machine's load beside them.

pytorch_lightning is imported when a callback (``LineProgress``, ``StepTimer``) is first
used, not with this module: a sweep's report formats its times without it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator

# re-exported: lengen.estimate was a part of this module, and callers import these from here
from lengen.estimate import (  # noqa: F401
    FORMAT,
    KEPT,
    MIN_TIMED_STEPS,
    Estimate,
    duration,
    eval_flops,
    interpolate,
    machine_key,
    machine_load,
    mechanism_key,
    pack_step,
    train_step_flops,
)

#: progress lines per run: enough to see a run move, few enough to read a sweep's log
LINES_PER_RUN = 20
#: seconds between two samples of the machine's load while a run trains (``StepTimer``): the
#: load average itself moves every 5 s
LOAD_EVERY = 10.0


def progress_mode(setting, streams=None) -> str:
    """``trainer.enable_progress_bar`` -> ``"bar"``, ``"lines"`` or ``"off"``. ``streams``:
    the outputs a bar would draw on (Lightning's on stdout, evaluation's on stderr)."""
    if setting is False:
        return "off"
    if setting in ("bar", "lines"):
        return setting
    streams = (sys.stdout, sys.stderr) if streams is None else streams
    on_terminal = all(_isatty(stream) for stream in streams)
    return "bar" if on_terminal and not in_parallel_sweep() else "lines"


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


def in_parallel_sweep() -> bool:
    """Whether this process runs a job of a ``-m`` sweep whose launcher is not Hydra's basic
    one (one job after another): joblib's jobs share the terminal they were started from."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():  # run(cfg) from a test or a notebook
        return False
    hydra = HydraConfig.get()
    launcher = str(hydra.launcher.get("_target_", ""))
    return hydra.mode == RunMode.MULTIRUN and not launcher.endswith("BasicLauncher")


def every_n_steps(max_steps: int) -> int:
    """Steps between two progress lines: ``LINES_PER_RUN`` lines over ``max_steps``."""
    return max(1, math.ceil(max_steps / LINES_PER_RUN))


def step_line(label: str, step: int, max_steps: int, loss: float | None, rate: float) -> str:
    """One progress line: where training is, its mean loss since the last line, its speed and
    the time left at that speed (at most: a criterion may stop it earlier)."""
    parts = [f"step {step}/{max_steps} ({100 * step // max(max_steps, 1)}%)"]
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    if rate > 0:
        parts.append(f"{rate:.3g} steps/s")
    if rate > 0 and step < max_steps:
        parts.append(f"{duration((max_steps - step) / rate)} left")
    return f"[{label}] " + " · ".join(parts)


def __getattr__(name: str):
    """``LineProgress`` and ``StepTimer``, Lightning callbacks, built on first use (the module
    docstring says why)."""
    if name in ("LineProgress", "StepTimer"):
        globals().update(_callbacks())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _callbacks() -> dict:
    import pytorch_lightning as pl

    class LineProgress(pl.Callback):
        """Lightning callback: a line on stdout every ``every`` steps (step / total, mean loss,
        steps/s, time left), one after each validation, and one when training ends."""

        def __init__(self, label: str, every: int) -> None:
            self.label, self.every = label, every
            self._losses: list[float] = []
            self._start_step, self._start_time = 0, 0.0

        def on_train_start(self, trainer, pl_module) -> None:
            # a resumed run starts at its checkpoint's step: its speed counts from there
            self._start_step, self._start_time = trainer.global_step, time.monotonic()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            loss = step_loss(pl_module, outputs)
            if loss is not None:
                self._losses.append(loss)
            step = trainer.global_step
            if step % self.every == 0 or step == trainer.max_steps:
                loss = sum(self._losses) / len(self._losses) if self._losses else None
                self._losses = []
                self._print(
                    trainer, step_line(self.label, step, trainer.max_steps, loss, self.rate(step))
                )

        def on_validation_end(self, trainer, pl_module) -> None:
            if trainer.sanity_checking:
                return
            metrics = getattr(pl_module, "last_validation", {}) or {}
            shown = " · ".join(f"{key} {value:.4g}" for key, value in sorted(metrics.items()))
            self._print(
                trainer, f"[{self.label}] validation at step {trainer.global_step}: {shown}"
            )

        def on_train_end(self, trainer, pl_module) -> None:
            step = trainer.global_step
            elapsed = time.monotonic() - self._start_time
            stopped = "" if step >= trainer.max_steps else f" (stopped before {trainer.max_steps})"
            self._print(
                trainer,
                f"[{self.label}] trained to step {step}{stopped} in {duration(elapsed)}; evaluating",
            )

        def rate(self, step: int) -> float:
            """Steps per second since training (or its resumption) started, validations included:
            what the time left will really cost."""
            elapsed = time.monotonic() - self._start_time
            return (step - self._start_step) / elapsed if elapsed > 0 else 0.0

        @staticmethod
        def _print(trainer, line: str) -> None:
            if trainer.is_global_zero:
                print(line, flush=True)  # flushed: a file or a pipe buffers otherwise

    class StepTimer(pl.Callback):
        """Lightning callback: the seconds a training step takes, from the end of the first
        step this process trained to the end of the last (validations between included;
        the first step, with its warm-up, left out). Reads the clock, and every ``LOAD_EVERY``
        seconds the machine's load (``lengen.estimate.machine_load``, a read of
        /proc/loadavg): the calibration records a step's quiet equivalent."""

        def __init__(self) -> None:
            self.first: tuple[int, float] | None = None
            self.last: tuple[int, float] | None = None
            self.loads: list[float] = []
            self._sampled = -math.inf

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            now = (trainer.global_step, time.monotonic())
            if self.first is None:
                self.first = now
            self.last = now
            if now[1] - self._sampled >= LOAD_EVERY:
                self.loads.append(machine_load())
                self._sampled = now[1]

        def mean_load(self) -> float | None:
            """The mean load per core sampled while training, and once now (the evaluation
            ran since): what the measured times are divided by. None before any step."""
            if not self.loads:
                return None
            samples = [*self.loads, machine_load()]
            return sum(samples) / len(samples)

        def step_seconds(self) -> float | None:
            """Mean seconds per step after the first; None with fewer than
            ``MIN_TIMED_STEPS`` steps trained (see there)."""
            if self.first is None or self.last is None or self.steps() < MIN_TIMED_STEPS:
                return None
            return (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])

        def steps(self) -> int:
            """Steps trained in this process (a resumed run: since its checkpoint)."""
            return (
                0 if self.first is None or self.last is None else self.last[0] - self.first[0] + 1
            )

    return {"LineProgress": LineProgress, "StepTimer": StepTimer}


def step_loss(pl_module, outputs) -> float | None:
    """This step's training loss: lengen's module keeps it on the host already (no device
    sync); another module's output is read instead."""
    logged = getattr(pl_module, "last_logged", None)
    if isinstance(logged, dict) and logged.get("train/loss") is not None:
        return float(logged["train/loss"])
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    return None if loss is None else float(loss)


def as_mode(progress) -> tuple[str, str]:
    """An evaluation's ``progress`` argument -> (mode of :func:`each`, label): a (mode, label)
    pair or a mode as they are; True (a notebook's or a test's call) a bar, False or None
    nothing."""
    if isinstance(progress, tuple):
        return progress
    if progress is True:
        return "bar", ""
    return ("off" if progress in (False, None) else progress), ""


def each(
    items: Iterable, *, desc: str, unit: str, mode: str, label: str = "", cost=None
) -> Iterator:
    """``items`` with progress in ``mode``: a tqdm bar, a line per item with the time left
    (``lines``, after ``[label]`` where given), or nothing (``off``); in both of the first a
    long item says it is still running (``lengen.heartbeat``: a line, or the bar's postfix). For loops too long to
    watch in silence (evaluation at many lengths). ``cost(item)``: the item's relative cost, so
    that the time left weighs what remains (evaluation: the length); default 1 each."""
    items = list(items)
    from lengen.heartbeat import heartbeat

    if mode == "bar":  # the heartbeat as the bar's postfix: a line would tear the bar
        from tqdm import tqdm

        with tqdm(items, desc=desc, unit=unit) as bar:
            for item in bar:
                with heartbeat(f"{unit} {item}", say=bar.set_postfix_str):
                    yield item
                bar.set_postfix_str("", refresh=False)  # the next item has not run long
        return

    costs = [cost(item) if cost else 1 for item in items]
    start = time.monotonic()
    for done, item in enumerate(items, start=1):
        if mode != "lines":
            yield item
            continue
        # a long item says it is still running (a length of hours printed nothing: O15)
        running = f"{desc}: {unit} {item} ({done}/{len(items)})"
        with heartbeat(f"[{label}] {running}" if label else running):
            yield item
        elapsed = time.monotonic() - start
        line = f"{desc}: {unit} {item} done ({done}/{len(items)}) in {duration(elapsed)}"
        if done < len(items):
            left = elapsed * sum(costs[done:]) / max(sum(costs[:done]), 1e-9)
            line += f", {duration(left)} left"
        print(f"[{label}] {line}" if label else line, flush=True)
