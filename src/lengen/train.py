"""``run(cfg)``: validate, build, fit, evaluate, write. The whole data flow in one place."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig

from lengen.build import build, instantiate_named, position_warnings
from lengen.checks import ConfigError, EvaluationOutOfMemory, check_batch_split
from lengen.config import run_label
from lengen.options import OptimConfig
from lengen.preflight import validate
from lengen.rundir import RunDirectory, resolve_run_dir, resolved_config


def run(cfg: DictConfig, run_dir: str | Path | None = None) -> dict:
    """Train on lengths up to ``data.len``, evaluate at every eval length, write the run dir.

    With ``resume=true`` the run continues from ``<run dir>/checkpoints/last.ckpt``. Under DDP
    every rank runs this; only rank 0 writes files, and the other ranks return ``{}``.
    """
    checked = validate(cfg)  # train.py's precheck checked it already: its typed configs back
    directory = RunDirectory(resolve_run_dir(cfg, run_dir))
    if (finished := directory.finished(cfg)) is not None:
        return finished
    data, model, lengths = build(cfg)  # components check their keys before anything is written
    with directory.owned(cfg) as resumed:  # locked while it runs; (checkpoint, step) or None
        directory.write_data_card(data, lengths)
        started_from = {}  # results.json's record of the base run (DroPE's route included)
        if cfg.init_from:
            from lengen.checkpoints import load_checkpoint, load_weights
            from lengen.rundir.init_from import init_from_record

            base = load_checkpoint(cfg.init_from, "init_from")
            if resumed is None:  # fine-tuning: start from another run's weights
                load_weights(model, base, "init_from")
            started_from = init_from_record(cfg, base)
        notes = position_warnings(model)
        fitting = time.monotonic()
        trainer, lit, logger, timing = fit(
            cfg, model, data, directory, resumed, optim=checked.optim, lengths=lengths
        )
        fit_seconds = time.monotonic() - fitting
        if not trainer.is_global_zero:
            return {}  # rank 0 evaluates and writes
        started = time.monotonic()
        results = evaluate_and_write(
            cfg, model, data, lengths, device=trainer.strategy.root_device, directory=directory,
            train_tokens=lit.train_tokens,
            extra={**training_record(trainer, resumed, notes, fit_seconds), **started_from},
            progress=evaluation_progress(cfg, directory),
        )  # fmt: skip
        if timing is not None:  # this machine's calibration learns from the run
            timing.finished(time.monotonic() - started)
        finish_logging(logger, results, directory)
        signal_after_training()
    return results


#: what ``signal_after_training`` says of a solo run (a pack says it of its members)
RUN_FINISHED = (
    "the final evaluation was finished and results.json written (the run is complete; nothing "
    "to resume)"
)


def signal_after_training(finished: str = RUN_FINISHED) -> None:
    """A SIGTERM/SIGUSR1 remembered after training ended (during the final evaluation) is not
    acted on: the evaluation finishes and the run is complete (docs/scaling.md). One line says
    so, or the user would not know why the run did not stop (SR7). The signal stays
    remembered: a local sweep starts no further run. ``finished``: what was finished (a pack's
    job, ``lengen.pack.train_pack``, names its members' results)."""
    import signal
    import sys

    from lengen.process import received_signal

    if signum := received_signal():
        name = signal.Signals(signum).name
        print(f"{name} received after training ended: {finished}", file=sys.stderr)


def evaluation_progress(cfg: DictConfig, directory: RunDirectory) -> tuple[str, str]:
    """(mode, label) of the evaluation's progress: as training's (``lengen.progress``), lines
    named by the run's folder so a sweep's log says whose they are."""
    from lengen.progress import progress_mode

    return progress_mode(cfg.trainer.get("enable_progress_bar", True)), directory.path.name


def fit(
    cfg: DictConfig,
    model,
    data,
    directory: RunDirectory,
    resumed,
    *,
    optim: OptimConfig,
    lengths: list[int] | None = None,
):
    """Train (or continue training) and save the last checkpoint -> (trainer, lit, logger,
    timing). With the evaluation ``lengths``, the run's estimated wall time is printed first
    (``RunTiming``; None on the other ranks, and without ``lengths``)."""
    from lengen.checkpoints import save_checkpoint
    from lengen.lit import DataModule

    trainer, lit, logger = make_trainer(cfg, model, directory, resumed, optim=optim)
    timing = None
    if lengths is not None and trainer.is_global_zero:
        timing = RunTiming.start(cfg, model, data, lengths, trainer, resumed, directory)
    datamodule = DataModule(data, num_workers=cfg.data.get("num_workers", 0))
    started = time.monotonic()
    trainer.fit(lit, datamodule=datamodule, ckpt_path=resumed[0] if resumed else None)
    if timing is not None:
        timing.fit_seconds = time.monotonic() - started
    save_checkpoint(trainer, directory.checkpoint)
    return trainer, lit, logger, timing


class RunTiming:
    """How long a run should take, said before training (one line), and what it took, added to
    this machine's calibration afterwards (``lengen.progress.Estimate``). It reads the clock,
    the built model's size and the data's lengths: no random generator, no extra step."""

    def __init__(self, estimate, timer, step_flops, eval_flops, protocol: str, lengths: int):
        self.estimate, self.timer = estimate, timer
        self.step_flops, self.eval_flops, self.protocol = step_flops, eval_flops, protocol
        self.lengths = lengths
        self.fit_seconds: float | None = None

    @classmethod
    def start(cls, cfg, model, data, lengths, trainer, resumed, directory) -> RunTiming | None:
        """Print the estimate line -> the timing to finish, or None where no estimate could be
        made (a component without the usual sizes: the run goes on without one)."""
        from functools import partial

        from lengen.caches import calibration_file
        from lengen.estimate import (
            Estimate,
            eval_flops,
            machine_key,
            mechanism_key,
            train_step_flops,
        )
        from lengen.model.looped import evaluation_passes
        from lengen.progress import StepTimer

        try:
            device = trainer.strategy.root_device.type
            machine = machine_key(device, trainer.world_size)
            # keyed by the encoding and model too: FLOPs alone missed PaTH's step by -48 %
            estimate = Estimate(calibration_file(), machine, device, mechanism_key(cfg))
            n_params = sum(p.numel() for p in model.parameters())
            sizes = (n_params, int(cfg.model.n_layers), int(cfg.model.d_model))
            tokens = data.sequence_length(data.train_len)
            step = train_step_flops(*sizes, data.batch_size, tokens)
            samples = int(cfg.eval.get("samples") or 1)
            evaluation = eval_flops(
                *sizes,
                samples,
                [data.sequence_length(n) for n in lengths],
                passes=partial(evaluation_passes, model),
            )
            protocol = str(cfg.eval.get("decoding") or "teacher_forced")
            steps = max(0, int(cfg.trainer.max_steps) - (resumed[1] if resumed else 0))
            line = estimate.line(steps, step, evaluation, protocol, len(lengths))
        except Exception as error:  # noqa: BLE001 - an estimate never stops a run
            print(f"estimate: none ({type(error).__name__}: {error})", flush=True)
            return None
        if cfg.trainer.get("criterion_target") is not None:
            line += "; at most: the criterion may stop training sooner"
        print(f"{sweep_label(directory)}{line}", flush=True)
        # hours of evaluation after seconds of training, unasked, is refused (O15: 10 hours)
        from lengen.estimate_bound import check_evaluation_time

        parts = estimate.parts(steps, step, evaluation, protocol, len(lengths))
        check_evaluation_time(cfg, parts, steps)
        timer = next(c for c in trainer.callbacks if isinstance(c, StepTimer))
        return cls(estimate, timer, step, evaluation, protocol, len(lengths))

    def finished(self, eval_seconds: float) -> None:
        """Add the finished run's step time, start-up and evaluation time to the calibration."""
        step = self.timer.step_seconds()
        start = None
        if step is not None and self.fit_seconds is not None:
            start = max(0.0, self.fit_seconds - self.timer.steps() * step)
        self.estimate.record(
            self.step_flops, step, self.eval_flops, eval_seconds, self.protocol, start, self.lengths,
            load=self.timer.mean_load(),  # the load while it trained: its quiet time recorded
        )  # fmt: skip


def keep_rows(path, rows: list[dict]) -> None:
    """The rows of the lengths finished so far, written atomically to ``path`` (a hidden
    ``.results<.tag>.partial.json``, removed once the results are written); a full disk
    costs only this copy."""
    import contextlib
    import json

    from lengen.atomic import atomic_write

    with contextlib.suppress(OSError):
        atomic_write(path, json.dumps({"rows": rows, "finished": False}, default=str) + "\n")


def sweep_label(directory: RunDirectory) -> str:
    """``[<run folder>] `` in a job of a -m sweep, whose lines may interleave; else nothing."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return f"[{directory.path.name}] "
    return ""


def finish_logging(logger, results: dict, directory: RunDirectory) -> None:
    from lengen.loggers import log_results

    log_results(logger, results["eval"], directory.path / "extrapolation.png")
    if logger:
        logger.finalize("success")


def training_record(trainer, resumed, notes: list[str], fit_seconds: float | None = None) -> dict:
    """What results.json records about training; ``fit_seconds``: this process's wall time from
    building the trainer to the saved last checkpoint."""
    from lengen.lit import CriterionStop

    stops = [c.record() for c in trainer.callbacks if isinstance(c, CriterionStop)]
    return {
        "train_steps": trainer.global_step,
        "criterion": stops[0] if stops else None,
        "world_size": trainer.world_size,
        "resumed": resumed is not None,
        "warnings": notes,
        "validation": dict(trainer.lightning_module.last_validation),
        "timing": timing_record(trainer, fit_seconds),
    }


def timing_record(trainer, fit_seconds: float | None) -> dict:
    """results.json's ``timing`` of a solo run (``timing_entry``) from its ``StepTimer``."""
    from lengen.progress import StepTimer

    timer = next((c for c in trainer.callbacks if isinstance(c, StepTimer)), None)
    if timer is None:
        return timing_entry(fit_seconds, 0, None, None)
    return timing_entry(fit_seconds, timer.steps(), timer.step_seconds(), timer.mean_load())


def timing_entry(
    fit_seconds: float | None, steps: int, step_seconds: float | None, load: float | None, **more
) -> dict:
    """What a run's training cost, the figures a pilot sizes a recipe by: ``fit_seconds``, this
    process's wall time from building the trainer to the saved last checkpoint (a resumed run:
    since its checkpoint); ``steps`` timed and the mean ``step_seconds`` after the first (null
    under ``MIN_TIMED_STEPS``); ``load``, the mean load per core while it trained
    (``lengen.estimate.machine_load``), so a loaded machine's times read as such. The
    evaluation's time is each row's ``seconds``."""
    return {
        "fit_seconds": None if fit_seconds is None else round(fit_seconds, 3),
        "steps": steps,
        "step_seconds": None if step_seconds is None else round(step_seconds, 6),
        "load": None if load is None else round(load, 2),
        **more,
    }


def make_trainer(cfg: DictConfig, model, directory: RunDirectory, resumed, *, optim: OptimConfig):
    """The Lightning trainer, module and logger of a run -> (trainer, lit, logger); ``optim``
    is the optimiser's typed config as ``validate`` checked it."""
    from lengen.lit import CriterionStop, LitModel, quiet_known_noise

    quiet_known_noise()
    import pytorch_lightning as pl

    from lengen.checkpoints import LocalCheckpointIO, StepCheckpoint

    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    use_thread_setting()
    config = resolved_config(cfg)
    lit = LitModel(
        model,
        optim,
        cfg.trainer.max_steps,
        config=config,
        seed=cfg.seed,
        compile=bool(cfg.model.get("compile", False)),  # a model of the user's may lack it
    )
    logger = instantiate_named(cfg.logger, save_dir=str(directory.path))
    # last.ckpt periodically and on preemption signals, always via temp + rename
    every = cfg.trainer.get("checkpoint_every_n_steps")
    callbacks = [StepCheckpoint(directory.checkpoint, every)]
    if cfg.trainer.get("criterion_target") is not None:  # before StepCheckpoint: saved state
        criterion = (cfg.trainer.criterion_metric, cfg.trainer.criterion_target)
        callbacks.insert(0, CriterionStop(*criterion, cfg.trainer.criterion_checks))
    # bars on a terminal; in a log file (SLURM, nohup, CI) a line every N steps instead
    from lengen.progress import LineProgress, StepTimer, every_n_steps, progress_mode

    callbacks.append(StepTimer())  # the step time, for this machine's estimates (RunTiming)
    progress = progress_mode(cfg.trainer.get("enable_progress_bar", True))
    if progress == "lines":
        callbacks.append(LineProgress(directory.path.name, every_n_steps(cfg.trainer.max_steps)))
    # validate at least once, at the end, however short the run
    interval = cfg.trainer.get("val_check_interval")
    validation_every = {}
    if isinstance(interval, int) and interval > cfg.trainer.max_steps:
        validation_every = {"val_check_interval": cfg.trainer.max_steps}
    trainer = instantiate_named(
        cfg.trainer,
        logger=logger,
        callbacks=callbacks,
        default_root_dir=str(directory.path),
        enable_checkpointing=False,  # StepCheckpoint writes the checkpoints
        use_distributed_sampler=False,  # the data module shards batches itself
        enable_progress_bar=progress == "bar",  # Lightning's bars take a bool
        **validation_every,
    )
    trainer.strategy.checkpoint_io = LocalCheckpointIO()  # no staging in $TMPDIR
    # lengen's handlers, installed at process start, stay: Lightning's would bypass SIGTERM in
    # the moments before StepCheckpoint starts (a preemption reported as success)
    trainer._signal_connector.register_signal_handlers = lambda: None
    if trainer.world_size > 1:  # the processes wait for each other to start: not forever
        watch_start_up(trainer, directory)
    try:  # what only the built trainer knows: its process count and device
        check_batch_split(cfg.data.batch_size, trainer.world_size)
        model.check_kernel(trainer.strategy.root_device.type, training=True)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if logger and directory.rank_zero:  # one writer for the whole run
        from lengen.loggers import open_csv_log

        open_csv_log(logger, resumed)
    if logger:
        logger.log_hyperparams(config)
    return trainer, lit, logger


def watch_start_up(trainer, directory: RunDirectory) -> None:
    """The process group's start-up, where each rank waits inside torch for the others to
    connect, ends on SIGTERM, SIGUSR1 or SIGINT (one line, 128 + the signal, failed.json) and
    after ``lengen.process.start_timeout()`` seconds (one line, exit 2, the folder this command
    made removed, as for a refusal): rank 0 of ranks that nothing starts (torchrun variables
    copied into a shell) waited forever, deaf to both (issue #51, SL06b). The ranks Lightning
    started here get the signal too."""
    import os
    import signal

    from lengen.preflight import remove_refused_run
    from lengen.process import signals_end_the_wait, start_timeout

    strategy = trainer.strategy
    start = strategy.setup_environment  # (Lightning's: torch.distributed.init_process_group)
    timeout, processes = start_timeout(), trainer.world_size
    where = f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ.get('MASTER_PORT', '?')}"

    def stop_ranks_started_here(signum: int) -> None:
        for child in getattr(strategy.launcher, "procs", None) or []:
            child.send_signal(signum)

    def on_signal(signum: int) -> str:
        line = (
            f"interrupted by {signal.Signals(signum).name} while the run's {processes} "
            f"processes were starting (at {where}); nothing trained, nothing saved"
        )
        stop_ranks_started_here(signum)
        directory.record_failure(InterruptedError(line))
        return line

    def on_timeout() -> tuple[str, int]:
        stop_ranks_started_here(signal.SIGTERM)
        remove_refused_run(directory.path)
        return (
            f"error: trainer.num_nodes={trainer.num_nodes}: the run's {processes} processes did "
            f"not all start within {timeout:g} s (waiting at {where}); allowed: start every "
            f"rank (srun in a SLURM job, torchrun on each node), trainer.num_nodes=1 "
            f"trainer.devices=1, or a longer wait: LENGEN_START_TIMEOUT=<seconds>",
            2,
        )

    def watched_start() -> None:
        with signals_end_the_wait(timeout, on_signal, on_timeout):
            start()

    strategy.setup_environment = watched_start


def use_thread_setting() -> None:
    """torch.set_num_threads(OMP_NUM_THREADS) where it is set: torch reads it only when
    imported, and a sweep's job may set it later (hydra/launcher=local's one thread per run, in
    the sweep's own process when hydra.launcher.n_jobs=1)."""
    import os

    import torch

    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))


def evaluate_and_write(
    cfg,
    model,
    data,
    lengths,
    *,
    device,
    directory: RunDirectory,
    train_tokens: int,
    extra: dict,
    tag: str | None = None,
    progress: bool | str | tuple[str, str] = True,
) -> dict:
    """Evaluate at every length, then write the plot and results (``results.json``, or
    ``results.<tag>.json`` for eval.py); print the table."""
    from lengen.errors import ResultsWriteError
    from lengen.evaluation import evaluate
    from lengen.plots import plot_extrapolation
    from lengen.plots.common import figure_output
    from lengen.plots.guard import draw, figures_noted
    from lengen.results import (
        build_results,
        format_ratios,
        format_table,
        learning_message,
        unwritten,
        write_results,
    )

    suffix = f".{tag}" if tag else ""
    results_path = directory.path / f"results{suffix}.json"
    # the rows of finished lengths, kept as each finishes: a process that dies without
    # unwinding (a native library's abort under a memory limit: E13b) lost them all
    partial = directory.path / f".results{suffix}.partial.json"
    unfinished = None
    explained: dict = {}  # attention diagnostics, accuracy by answer position (docs/analysis.md)
    with figures_noted() as figure_notes:  # every figure until results.json: a failure is a note
        try:
            rows = evaluate(
                data,
                model.to(device),
                lengths,
                settings=cfg.eval,
                output_dir=directory.path,
                tag=suffix,
                progress=progress,
                report=explained,
                on_row=lambda rows: keep_rows(partial, rows),
            )
        except EvaluationOutOfMemory as error:  # keep what was measured, then say why it stopped
            if not error.rows:
                raise
            rows, unfinished = error.rows, error
            extra = {**extra, "warnings": [*extra.get("warnings", []), str(error)]}
        label = run_label(cfg, rows[0]["protocol"] if rows else "", tag)  # names the variant
        results = build_results(
            cfg,
            model,
            data,
            rows,
            train_tokens=train_tokens,
            device=device.type,
            extra={**extra, **explained, "label": label},
        )
        plot_path = directory.path / f"extrapolation{suffix}.png"  # and .pdf beside it
        draw(plot_path.name, plot_extrapolation, results, plot_path, **figure_output(cfg.eval))
    if figure_notes:
        results["warnings"] = [*results.get("warnings", []), *figure_notes]
    try:  # last: its presence means the run finished
        write_results(results_path, results)
    except OSError as error:  # a disk that stays full (DF03): one line and exit 4, no traceback
        raise ResultsWriteError(unwritten(results_path, partial, error, tag)) from None
    partial.unlink(missing_ok=True)
    print(f"\n{label} · {data.training_summary()}\n{format_table(rows)}")
    if rows:  # how far it extrapolates, in one number per threshold (ρ_τ)
        longest = max(row["length"] for row in rows)
        print(format_ratios(results["length_ratio"], results["train_len"], longest))
    if message := learning_message(results):
        print(f"WARNING: {message}")
    print(f"results: {results_path}", flush=True)  # a sweep's worker may live on: show it now
    if unfinished is not None:
        raise unfinished
    return results
