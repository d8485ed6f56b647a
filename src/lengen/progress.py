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

**How long, before it starts** (``Estimate``): before training, a run prints one line with its
expected wall time, training steps × the time of a step + evaluation. The times come from
this machine's calibration file (``lengen.caches.calibration_file``), which every finished run
updates with what it measured (``StepTimer``: the time between steps, validations included,
from runs of at least ``MIN_TIMED_STEPS`` steps; the evaluation's wall time; Lightning's
start-up), keyed by the machine (device, CPU or GPU model, threads, processes) and placed by
the FLOPs of a step (``train_step_flops``) or of the evaluation (``eval_flops``): a size
measured before gives its own time; another size is read between the two nearest measured
ones (log-log), or from the nearest (``interpolate``). With nothing
measured here yet, the line says it is a rough guess from the FLOP count at an assumed speed.
Reading and updating it costs milliseconds and touches no random generator of the run.

pytorch_lightning is imported when a callback (``LineProgress``, ``StepTimer``) is first
used, not with this module: a sweep's report formats its times without it.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

#: progress lines per run: enough to see a run move, few enough to read a sweep's log
LINES_PER_RUN = 20


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


def duration(seconds: float) -> str:
    """12s, 3m05s, 2h07m: short enough to scan in a column of lines."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


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
        the first step, with its warm-up, left out). Reads the clock only."""

        def __init__(self) -> None:
            self.first: tuple[int, float] | None = None
            self.last: tuple[int, float] | None = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            now = (trainer.global_step, time.monotonic())
            if self.first is None:
                self.first = now
            self.last = now

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
    (``lines``, after ``[label]`` where given), or nothing (``off``). For loops too long to
    watch in silence (evaluation at many lengths). ``cost(item)``: the item's relative cost, so
    that the time left weighs what remains (evaluation: the length); default 1 each."""
    items = list(items)
    if mode == "bar":
        from tqdm import tqdm

        yield from tqdm(items, desc=desc, unit=unit)
        return
    costs = [cost(item) if cost else 1 for item in items]
    start = time.monotonic()
    for done, item in enumerate(items, start=1):
        yield item
        if mode != "lines":
            continue
        elapsed = time.monotonic() - start
        line = f"{desc}: {unit} {item} done ({done}/{len(items)}) in {duration(elapsed)}"
        if done < len(items):
            left = elapsed * sum(costs[done:]) / max(sum(costs[:done]), 1e-9)
            line += f", {duration(left)} left"
        print(f"[{label}] {line}" if label else line, flush=True)


# -- how long a run will take, before it starts -------------------------------------------------
#: observations kept per machine and kind (the newest): enough to span a project's sizes
KEPT = 40
#: a process that trained fewer steps calibrates no step time: it timed its warm-up and its
#: validations (a test's run validates every few steps) more than its steps, and such times,
#: once the largest measured, made the estimate of a larger run 321 h instead of hours
MIN_TIMED_STEPS = 100
#: the calibration file's format: files of another (version 1 kept the short runs' step
#: times) are read as empty and replaced at the next record
FORMAT = 2
#: assumed speeds where nothing was measured on the machine yet (the line says "rough"): a
#: small model on a CPU reaches ~half of the matmul peak (docs/benchmarks.md), a GPU far more;
#: the start-up is Lightning's (trainer set-up, sanity validation)
ROUGH_FLOPS_PER_SECOND = {"cpu": 20e9, "cuda": 20e12, "mps": 2e12}
ROUGH_START_SECONDS = 3.0
#: and per evaluation length: its diagnostics and figure, more than its FLOPs on small models
ROUGH_SECONDS_PER_LENGTH = 2.0


def train_step_flops(n_params: int, n_layers: int, d_model: int, batch: int, tokens: int) -> float:
    """FLOPs of one training step (forward and backward) of ``batch`` sequences of ``tokens``:
    6 per parameter and token (Kaplan et al. 2020) plus the attention's scores and mixing,
    12 · layers · d_model · tokens² per sequence. A size measure for the calibration, which
    turns it into seconds: constant factors cancel."""
    return float(batch) * (6 * n_params * tokens + 12 * n_layers * d_model * tokens**2)


def eval_flops(
    n_params: int, n_layers: int, d_model: int, samples: int, tokens: list[int]
) -> float:
    """FLOPs of evaluating ``samples`` sequences at each of ``tokens`` (forward only)."""
    return float(sum(samples * (2 * n_params * t + 4 * n_layers * d_model * t**2) for t in tokens))


def machine_key(device: str, world_size: int = 1) -> str:
    """What a calibration is valid for: the device type and model, torch's threads (CPU) and
    the run's processes."""
    import torch

    from lengen.provenance import cpu_model

    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        threads = torch.get_num_threads()
        name = f"{cpu_model()} · {threads} thread{'s' * (threads != 1)}"
    return f"{device} · {name}" + (f" · {world_size} processes" if world_size > 1 else "")


def interpolate(observations: list, flops: float) -> float | None:
    """Seconds at ``flops`` from measured (flops, seconds) pairs: the fastest of those within
    10% (scaled to ``flops``): what the machine does when nothing else runs, since runs timed
    beside other work (a test suite, a parallel sweep) measure that work too, many times over,
    and a median of such times once said 7m41s for a run that took 20 s; else between the two
    nearest around it, linear in log-log; above every one, the largest's time plus the FLOPs
    beyond it at the fastest rate measured (scaling the largest would multiply whatever slowed
    it, load or overheads, by the size ratio); below every one, the
    smallest's time (a floor: small sizes are bound by overheads, not FLOPs). None without
    observations."""
    fastest: dict[float, float] = {}  # each size measured: its fastest time (see above)
    for f, s in observations:
        if f > 0 and s > 0:
            fastest[float(f)] = min(float(s), fastest.get(float(f), math.inf))
    pairs = sorted(fastest.items())
    if not pairs or flops <= 0:
        return None
    near = [s * flops / f for f, s in pairs if abs(f / flops - 1) <= 0.1]
    if near:
        return min(near)
    below = [p for p in pairs if p[0] < flops]
    above = [p for p in pairs if p[0] > flops]
    if below and above:
        (f0, s0), (f1, s1) = below[-1], above[0]
        weight = math.log(flops / f0) / math.log(f1 / f0)
        return math.exp(math.log(s0) + weight * (math.log(s1) - math.log(s0)))
    if below:
        f0, s0 = below[-1]
        rate = max(f / s for f, s in pairs)  # FLOPs a second
        return s0 + (flops - f0) / rate
    return above[0][1]


class Estimate:
    """A run's expected wall time from the machine's calibration file (the module docstring
    says how). ``record`` adds what a finished run measured."""

    def __init__(self, path: str | Path, machine: str, device: str) -> None:
        self.path, self.machine, self.device = Path(path), machine, device
        self.calibration = self._read()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict) or data.get("version") != FORMAT:
                return {}
            return data["machines"].get(self.machine, {})
        except (OSError, ValueError, KeyError, AttributeError):
            return {}

    def line(
        self,
        steps: int,
        step_flops: float,
        evaluation: float,
        protocol: str,
        lengths: int = 1,
        members: int = 1,
    ) -> str:
        """One line: the total, how it splits, and whether it is calibrated here. ``evaluation``:
        the evaluation's FLOPs over its ``lengths`` lengths. ``members`` > 1: a pack of that many
        runs (``step_flops`` and ``evaluation`` one member's), which trains them all in one
        step: steps × one pack step's time (``pack_step``), not members × a run's, then
        evaluates each member."""
        if members > 1:
            step = pack_step(self.calibration, step_flops, members)
        else:
            step = interpolate(self.calibration.get("train", []), step_flops)
        # per evaluation length: a length costs its figure and checks besides its FLOPs
        per_length = interpolate(self.calibration.get(f"eval {protocol}", []), evaluation / lengths)
        evaluate = None if per_length is None else per_length * lengths * members
        starts = self.calibration.get("start", [])
        start = sorted(starts)[len(starts) // 2] if starts else None
        # every finished run records its evaluation, a long enough one its step time too
        runs = max((len(v) for v in self.calibration.values() if isinstance(v, list)), default=0)
        # what is not measured here yet, named in the line (the rest is calibrated)
        guessed = [
            part
            for part, value in (
                ("steps", step),
                (f"{protocol} evaluation", evaluate),
                ("start-up", start),
            )
            if value is None
        ]
        speed = ROUGH_FLOPS_PER_SECOND.get(self.device, ROUGH_FLOPS_PER_SECOND["cpu"])
        step = members * step_flops / speed if step is None else step
        if evaluate is None:
            evaluate = members * (evaluation / speed + ROUGH_SECONDS_PER_LENGTH * lengths)
        start = ROUGH_START_SECONDS if start is None else start
        total = start + steps * step + evaluate
        a_step = "a pack step" if members > 1 else ""
        split = (
            f"{steps:,} steps × {_seconds(step)}{' ' * bool(a_step)}{a_step} + evaluation "
            f"{duration(evaluate)} + start-up {duration(start)}"
        )
        if len(guessed) == 3:
            how = (
                f"rough: {step_flops / 1e9:.3g} GFLOP a step at an assumed {speed / 1e9:g} "
                f"GFLOP/s where nothing is measured on this machine yet; finished runs calibrate "
                f"it ({self.path})"
            )
        elif guessed:
            how = (
                f"partly rough: {' and '.join(guessed)} not yet measured on this machine (a FLOP "
                f"count at an assumed {speed / 1e9:g} GFLOP/s), the rest calibrated by {runs} "
                f"finished run{'s' * (runs != 1)}"
            )
        else:
            how = f"calibrated on this machine by {runs} finished run{'s' * (runs != 1)}"
        if members > 1 and "steps" not in guessed and not self.calibration.get("train pack"):
            how += "; no pack measured here yet: its step read from single runs of its FLOPs"
        whole = f"for the pack of {members} runs " if members > 1 else ""
        return f"estimate: ≈ {duration(total)} {whole}({split}; {how})"

    def record(
        self,
        step_flops: float,
        step_seconds: float | None,
        evaluation: float,
        eval_seconds: float,
        protocol: str,
        start_seconds: float | None,
        lengths: int = 1,
        members: int = 1,
    ) -> None:
        """Add a finished run's measurements to the file (written atomically; a run that
        could not write it loses nothing but the calibration): the seconds of a step at its
        FLOPs, of an evaluation length at its mean FLOPs, and the start-up. A pack of
        ``members`` runs (> 1; ``step_flops`` one member's) records its step apart, as
        ``train pack`` at the pack's FLOPs (``pack_step``); ``evaluation`` and
        ``eval_seconds`` are then one member's."""
        from lengen.atomic import atomic_write

        try:
            data = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict) or data.get("version") != FORMAT:
            data = {"version": FORMAT, "machines": {}}
        if not isinstance(data.get("machines"), dict):
            data["machines"] = {}
        machine = data["machines"].setdefault(self.machine, {})
        train = "train pack" if members > 1 else "train"
        new = {
            train: [members * step_flops, step_seconds] if step_seconds else None,
            f"eval {protocol}": [evaluation / lengths, eval_seconds / lengths]
            if evaluation > 0 and lengths > 0
            else None,
            "start": start_seconds if start_seconds is not None and start_seconds >= 0 else None,
        }
        for kind, value in new.items():
            if value is not None:
                machine[kind] = [*machine.get(kind, []), value][-KEPT:]
        with contextlib.suppress(OSError):
            atomic_write(self.path, json.dumps(data, indent=1) + "\n")


def pack_step(calibration: dict, step_flops: float, members: int) -> float | None:
    """Seconds of one step of a pack of ``members`` runs of ``step_flops`` each: from the packs
    measured on this machine (``train pack``, placed by the pack's FLOPs, members ×
    ``step_flops``); with none, from single runs' steps at the pack's FLOPs (a stand-in: one
    large model's matmuls and a pack's batched small ones differ in speed, either way; the
    line says so); None with neither."""
    flops = members * step_flops
    packed = interpolate(calibration.get("train pack", []), flops)
    return packed if packed is not None else interpolate(calibration.get("train", []), flops)


def _seconds(value: float) -> str:
    """A step's time: 0.042 s, 1.3 s."""
    return f"{value:.2g} s" if value < 10 else duration(value)
