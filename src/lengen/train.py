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

    node = OmegaConf.masked_copy(node, [k for k in node if k != "name"])
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
            cfg.data, model_kind=model_kind(cfg), seed=cfg.seed, eval_seed=cfg.eval.seed
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
    """Train on lengths up to ``data.len``, evaluate at every eval length, write the run dir."""
    validate(cfg)
    run_dir = resolve_run_dir(cfg, run_dir)
    results_path = run_dir / "results.json"
    if results_path.exists():
        raise ConfigError(
            f"hydra.run.dir={run_dir} already holds a finished run (results.json); "
            f"allowed: a new hydra.run.dir, or remove that directory yourself"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    data, model, lengths = build(cfg)
    if cfg.init_from:  # fine-tuning: start from another run's weights
        from lengen.checkpoints import load_checkpoint, load_weights

        load_weights(model, load_checkpoint(cfg.init_from, "init_from"), "init_from")
    notes = position_warnings(model)

    quiet_known_noise()
    import pytorch_lightning as pl

    from lengen.lit import DataModule, LitModel
    from lengen.loggers import log_results

    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    config = OmegaConf.to_container(cfg, resolve=True)
    config.pop("hydra", None)
    lit = LitModel(model, cfg.optim, cfg.trainer.max_steps, config=config)
    logger = instantiate_named(cfg.logger, save_dir=str(run_dir))
    checkpoint_dir = run_dir / "checkpoints"
    callbacks = [
        pl.callbacks.ModelCheckpoint(
            dirpath=checkpoint_dir, save_last=True, save_top_k=0, enable_version_counter=False
        ),
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
        **validation_every,
    )
    if logger:
        logger.log_hyperparams(config)
    trainer.fit(lit, datamodule=DataModule(data))
    save_checkpoint(trainer, checkpoint_dir / "last.ckpt")

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
        extra={"train_steps": trainer.global_step, "warnings": notes, "validation": validation},
        progress=trainer.progress_bar_callback is not None,
    )
    log_results(logger, results["eval"], run_dir / "extrapolation.png")
    if logger:
        logger.finalize("success")
    return results


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


def save_checkpoint(trainer, path: Path) -> None:
    """Lightning checkpoint written under a temporary name, then renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    trainer.save_checkpoint(tmp)
    tmp.replace(path)
