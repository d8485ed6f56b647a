"""``run(cfg)``: validate, build, fit, evaluate, write. The whole data flow in one place."""

from __future__ import annotations

import functools
import logging
import warnings
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lengen.config import ConfigError, eval_lengths, validate

log = logging.getLogger("lengen")


def instantiate_named(node: DictConfig, **kwargs):
    """``hydra.utils.instantiate`` for group yamls, whose ``name:`` key is ours, not the target's."""
    from hydra.utils import instantiate

    # ``name`` names the choice; ``compile`` (model.compile) is applied by LitModel;
    # ``checkpoint_every_n_steps`` (trainer) by the StepCheckpoint callback; ``num_workers``
    # (data) by the DataModule
    ours = ("name", "compile", "checkpoint_every_n_steps", "num_workers")
    node = OmegaConf.masked_copy(node, [k for k in node if k not in ours])
    return instantiate(node, **kwargs)


def model_kind(cfg: DictConfig) -> str:
    from hydra.utils import get_class

    return get_class(cfg.model._target_).kind


def build(cfg: DictConfig):
    """Data and model from a config -> (TaskData, model, eval lengths). Torch only.

    The PE is wired in here, visibly: the pe yaml gives a partial; the run adds what the
    table-based encodings need to know about lengths; the model supplies its sizes.
    """
    import torch

    lengths = eval_lengths(cfg)
    try:
        data = instantiate_named(
            cfg.data,
            model_kind=model_kind(cfg),
            seed=cfg.seed,
            eval_seed=cfg.eval.seed,
            # tasks' curricula (regular_increase) need the horizon; text data takes no such key
            **({"max_steps": cfg.trainer.max_steps} if "curriculum" in cfg.data else {}),
        )
        pe = functools.partial(
            instantiate_named(cfg.pe),
            train_positions=data.max_position(data.train_len),
            max_positions=max(data.max_position(length) for length in lengths),
        )
        torch.manual_seed(cfg.seed)
        model = instantiate_named(cfg.model, pe=pe, vocab_size=data.vocab_size)
    except Exception as error:  # the components' own checks name the key
        cause = _user_error(error)
        if cause is None:
            raise
        raise ConfigError(str(cause)) from None
    return data, model, lengths


def _user_error(error: BaseException) -> ValueError | None:
    """The ValueError a component raised, unwrapped from Hydra's InstantiationException."""
    while error is not None:
        if isinstance(error, ValueError):
            return error
        error = error.__cause__
    return None


def resolve_run_dir(cfg: DictConfig, run_dir: str | Path | None) -> Path:
    if run_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            run_dir = HydraConfig.get().runtime.output_dir
        elif "hydra" in cfg:
            run_dir = cfg.hydra.run.dir
        else:
            raise ConfigError("hydra.run.dir is unknown: pass run_dir= to run() outside Hydra")
    return Path(run_dir)


def save_config(cfg: DictConfig, path: Path) -> None:
    from lengen.results import atomic_write_text

    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("hydra", None)
    atomic_write_text(path, OmegaConf.to_yaml(container))


def position_warnings(model) -> list[str]:
    if not model.position_blind:
        return []
    message = (
        "a bidirectional stack without positional information cannot tell positions apart "
        "(permutation-invariant); its results are labelled position_blind"
    )
    warnings.warn(message, stacklevel=2)
    return [message]


class _DropLitLoggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def quiet_known_noise() -> None:
    """Silence two messages pytorch-lightning 2.6.6 prints with torch 2.13 on every run (an
    advert for another logger, a deprecation inside Lightning), so real warnings stand out."""
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated")
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropLitLoggerTip) for f in rank_zero.filters):
        rank_zero.addFilter(_DropLitLoggerTip())


def run(cfg: DictConfig, run_dir: str | Path | None = None) -> dict:
    """Train on lengths up to ``data.len``, evaluate at every eval length, write the run dir.

    With ``resume=true`` the run continues from ``<run dir>/checkpoints/last.ckpt``. Under DDP
    every rank runs this; only rank 0 writes files, and the other ranks return ``{}``.
    """
    from lengen.checkpoints import check_resume, is_rank_zero

    validate(cfg)
    run_dir = resolve_run_dir(cfg, run_dir)
    results_path = run_dir / "results.json"
    checkpoint_dir = run_dir / "checkpoints"
    if cfg.resume and results_path.exists():
        import json

        print(f"resume=true: {run_dir} already finished (results.json); nothing to do")
        return json.loads(results_path.read_text())
    if results_path.exists():
        raise ConfigError(
            f"hydra.run.dir={run_dir} already holds a finished run (results.json); "
            f"allowed: a new hydra.run.dir, or remove that directory yourself"
        )
    rank_zero = is_rank_zero()
    resumed = check_resume(cfg, run_dir, rank_zero)  # (checkpoint, step) or None
    resume_from = resumed[0] if resumed else None
    run_dir.mkdir(parents=True, exist_ok=True)
    if rank_zero and resume_from is None:
        save_config(cfg, run_dir / "config.yaml")
    if rank_zero and resume_from is not None:  # the interruption's record no longer applies
        (run_dir / "failed.json").unlink(missing_ok=True)
    data, model, lengths = build(cfg)
    # data_card.json: lengths, vocabulary, curriculum, seeds (tasks; text data has none yet)
    if rank_zero and hasattr(data, "card_json"):
        from lengen.results import atomic_write_text

        atomic_write_text(run_dir / "data_card.json", data.card_json(lengths))
    if cfg.init_from and resume_from is None:  # fine-tuning: start from another run's weights
        from lengen.checkpoints import load_checkpoint, load_weights

        load_weights(model, load_checkpoint(cfg.init_from, "init_from"), "init_from")
    notes = position_warnings(model)

    quiet_known_noise()
    import pytorch_lightning as pl

    from lengen.lit import DataModule, LitModel, StepCheckpoint, save_checkpoint
    from lengen.loggers import log_results

    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    config = OmegaConf.to_container(cfg, resolve=True)
    config.pop("hydra", None)
    lit = LitModel(
        model,
        cfg.optim,
        cfg.trainer.max_steps,
        config=config,
        seed=cfg.seed,
        compile=bool(cfg.model.get("compile", False)),
    )
    logger = instantiate_named(cfg.logger, save_dir=str(run_dir))
    # last.ckpt periodically and on preemption signals, always via temp + rename
    callbacks = [
        StepCheckpoint(checkpoint_dir / "last.ckpt", cfg.trainer.get("checkpoint_every_n_steps"))
    ]
    # validate at least once, at the end, however short the run
    interval = cfg.trainer.get("val_check_interval")
    validation_every = {}
    if isinstance(interval, int) and interval > cfg.trainer.max_steps:
        validation_every = {"val_check_interval": cfg.trainer.max_steps}
    trainer = instantiate_named(
        cfg.trainer,
        logger=logger,
        callbacks=callbacks,
        default_root_dir=str(run_dir),
        enable_checkpointing=False,  # StepCheckpoint writes the checkpoints
        use_distributed_sampler=False,  # the data module shards batches itself
        **validation_every,
    )
    batch_size = getattr(data, "batch_size", None)
    if batch_size is not None and batch_size % trainer.world_size:
        raise ConfigError(
            f"data.batch_size={batch_size} is the global batch and must be divisible by the "
            f"{trainer.world_size} processes (trainer.devices × trainer.num_nodes)"
        )
    device = trainer.strategy.root_device.type
    if getattr(model, "uses_flex", False) and device != "cuda":
        raise ConfigError(
            f"model.attention=flex cannot train on {device}: FlexAttention trains on CUDA only; "
            f"allowed here: auto (on CPU, flex serves eval.py re-evaluations)"
        )
    if logger and resumed and rank_zero:
        continue_csv_log(logger, resumed[1])
    if logger:
        logger.log_hyperparams(config)
    datamodule = DataModule(data, num_workers=cfg.data.get("num_workers", 0))
    trainer.fit(lit, datamodule=datamodule, ckpt_path=resume_from)
    save_checkpoint(trainer, checkpoint_dir / "last.ckpt")
    if not trainer.is_global_zero:
        return {}  # rank 0 evaluates and writes

    validation = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    results = evaluate_and_write(
        cfg,
        model,
        data,
        lengths,
        device=trainer.strategy.root_device,
        results_path=results_path,
        plot_path=run_dir / "extrapolation.png",
        train_tokens=lit.train_tokens,
        extra={
            "train_steps": trainer.global_step,
            "world_size": trainer.world_size,
            "resumed": resume_from is not None,
            "warnings": notes,
            "validation": validation,
        },
        progress=trainer.progress_bar_callback is not None,
    )
    log_results(logger, results["eval"], run_dir / "extrapolation.png")
    if logger:
        logger.finalize("success")
    return results


def continue_csv_log(logger, step: int) -> None:
    """Keep an interrupted run's CSV log up to ``step``, which Lightning's CSV logger would
    delete when it starts; the resumed run appends to it (a step logged after the checkpoint
    and before a crash is dropped, so no step appears twice)."""
    import csv

    from pytorch_lightning.loggers import CSVLogger

    if not isinstance(logger, CSVLogger):
        return  # wandb: the resumed part is a new wandb run
    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():
        return
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        keys = list(reader.fieldnames or [])
        rows = [row for row in reader if row.get("step") and int(row["step"]) < step]
    with warnings.catch_warnings():  # its warning that it deletes the file: we put it back
        warnings.simplefilter("ignore")
        writer = logger.experiment
    writer.metrics_keys = sorted(keys)  # later rows merge their columns with these
    with open(path, "w", newline="") as file:
        out = csv.DictWriter(file, fieldnames=writer.metrics_keys)
        out.writeheader()
        out.writerows(rows)


def evaluate_and_write(
    cfg,
    model,
    data,
    lengths,
    *,
    device,
    results_path: Path,
    plot_path: Path,
    train_tokens: int,
    extra: dict,
    progress: bool = True,
) -> dict:
    """Evaluate at every length, then write the plot and results.json; print the table."""
    from lengen.plots import plot_extrapolation
    from lengen.results import build_results, format_table, write_results

    # each data source evaluates in its own way (tasks: accuracy; text: perplexity) and may
    # write extra files (loss by position, accuracy by depth) beside results.json
    rows = data.evaluate(
        model.to(device),
        lengths,
        settings=cfg.eval,
        output_dir=results_path.parent,
        tag=results_path.name.removeprefix("results").removesuffix(".json"),
        progress=progress,
    )
    results = build_results(
        cfg, model, data, rows, train_tokens=train_tokens, device=device.type, extra=extra
    )
    plot_extrapolation(results, plot_path)
    write_results(results_path, results)
    print(
        f"\n{results['task']} · {results['model']} · pe={results['pe']} · "
        f"trained on lengths {data.min_len}–{data.train_len}\n{format_table(rows)}"
    )
    print(f"results: {results_path}")
    return results
