"""The run's typed configs, without torch: the top-level keys, the model, the optimiser, the
evaluation, the trainer keys lengen reads and the loggers (``lengen.schema``; each encoding's is
beside it in ``lengen.pe.config``, each task's and data source's in its module in
``lengen.data``, the model's beside the model in ``lengen.model.config``).

Each class's fields are the keys of its yaml (``configs/model/*.yaml``, ``configs/eval/*.yaml``,
``configs/trainer/*.yaml``, ``configs/logger/*.yaml``, train.yaml's ``optim`` and top-level
keys) with their one default and the rule that refuses other values; ``tests/test_configs.py``
compares every yaml with its class. ``lengen.preflight.validate`` builds them from the composed
config, so a bad value is refused, with the key named, before anything imports torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from lengen.results import RATIO_THRESHOLDS
from lengen.schema import (
    Config,
    flag,
    integer,
    integer_in,
    interval,
    one_of,
    option,
    spelled_one_of,
)

#: ``eval.decoding``: the evaluation protocols of tasks
PROTOCOLS = ("teacher_forced", "greedy")
#: ``eval.protocol``: how language modelling scores its windows (``lengen.evaluation.text``)
TEXT_PROTOCOLS = ("nonoverlap", "sliding")
#: validation metrics a run can be trained to (``trainer.criterion_metric``)
CRITERION_METRICS = ("exact_match", "accuracy")
STRATEGIES = ("auto", "ddp", "ddp_find_unused_parameters_true")
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true", "64")
#: ``logger.mode`` of wandb (null: ``$WANDB_MODE``, else offline; lengen.loggers)
WANDB_MODES = ("offline", "online", "disabled")
#: ``resume``: false (a fresh run), true (continue an interrupted run), auto (continue it if it
#: has a checkpoint, start it otherwise, report it done if finished: sweeps that fill gaps)
RESUME_MODES = (False, True, "auto")
#: ``eval.plot_formats``: what run figures can be written as
PLOT_FORMATS = ("png", "pdf", "svg")


# -- rules of the run's keys ---------------------------------------------------------------
def is_list(value) -> bool:
    """A yaml list (a list, a tuple or OmegaConf's ListConfig), not a string."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def _seed(key: str, value):
    integer(minimum=0)(key, value)
    if value >= 2**32:  # numpy and Lightning seed with 32 bits
        raise ValueError(f"{key} must be an integer in [0, 2^32 - 1], got {value}")
    return value


def _data_seed(key: str, value):
    """``data.seed``: null (the training stream follows ``seed``) or a seed."""
    if value is None:
        return None
    try:
        return _seed(key, value)
    except ValueError:
        raise ValueError(
            f"{key} must be null or an integer in [0, 2^32 - 1], got {value!r}"
        ) from None


def data_seed(cfg) -> int:
    """The seed of the training stream: ``data.seed``, or ``seed`` where it is null (the model's
    initialisation always follows ``seed``; evaluation instances follow ``eval.seed``)."""
    seed = cfg.data.get("seed")
    return cfg.seed if seed is None else seed


def _ratio_thresholds(key: str, value):
    """``eval.ratio_thresholds``: a list of numbers τ in (0, 1] (ρ_τ, lengen.results)."""
    ok = is_list(value) and len(value) > 0
    ok = ok and all(isinstance(t, int | float) and not isinstance(t, bool) for t in value)
    if not (ok and all(0 < t <= 1 for t in value)):
        raise ValueError(f"{key} must be a non-empty list of numbers in (0, 1], got {value!r}")
    return tuple(float(t) for t in value)


def _plot_formats(key: str, value):
    """``eval.plot_formats``: a non-empty list of distinct formats every run figure is
    written in."""
    ok = is_list(value) and len(value) > 0 and len(set(value)) == len(value)
    if not (ok and all(v in PLOT_FORMATS for v in value)):
        raise ValueError(
            f"{key} must be a non-empty list of distinct formats from "
            f"{', '.join(PLOT_FORMATS)}, got {value!r}"
        )
    return tuple(value)


def _resume(key: str, value):
    if value not in RESUME_MODES:
        raise ValueError(f"{key} must be true, false or auto, got {value!r}")
    return value


def _init_from(key: str, value):
    """A run directory holding checkpoints/last.ckpt, or a checkpoint file: read as far as it
    can be without torch (a checkpoint is a zip archive, whose directory sits at its end, so a
    truncated file is not one)."""
    import zipfile

    if value is None:
        return value
    path = Path(str(value))
    if not path.exists():
        raise ValueError(
            f"{key}={value}: no such run directory or checkpoint; allowed: null or a path to a "
            f"run directory or .ckpt file"
        )
    file = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(
            f"{key}={value}: no checkpoint there (checkpoints/last.ckpt); the run never "
            f"finished training, so there is nothing to load"
        )
    if not zipfile.is_zipfile(file):
        raise ValueError(
            f"{key}={value}: {file.name} is not a PyTorch checkpoint (truncated, or another "
            f"format); allowed: a run directory or a .ckpt file written by lengen"
        )
    return value


def _betas(key: str, value):
    ok = is_list(value) and len(value) == 2
    ok = ok and all(isinstance(b, int | float) and not isinstance(b, bool) for b in value)
    if value is not None and not (ok and all(0 <= b < 1 for b in value)):
        raise ValueError(f"{key} must be two numbers in [0, 1), got {value!r}")
    return value


def _devices(key: str, value):
    ok = value in (-1, "auto") or (
        isinstance(value, int) and not isinstance(value, bool) and value >= 1
    )
    # a list: device indices, at least one, each once ([] left Lightning without a device:
    # its MisconfigurationException after the run folder was written, V05)
    indices = is_list(value) and list(value) and len(set(value)) == len(value)
    indices = indices and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    )
    if not (ok or indices):
        raise ValueError(
            f"{key} must be a positive integer, -1, auto or a non-empty list of distinct device "
            f"indices (>= 0), got {value!r}"
        )
    return value


def _text(*, nullable: bool = False):
    """A rule: a non-empty string (a yaml number is refused, not turned into one), or None
    where ``nullable``."""

    def rule(key: str, value):
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            wanted = "a non-empty string" + (" or null" if nullable else "")
            raise ValueError(f"{key} must be {wanted}, got {value!r}")
        return value

    return rule


def _progress(key: str, value):
    """``trainer.enable_progress_bar`` (``lengen.progress``): a flag, or the form to use
    whatever the output. Not ``one_of``: 1 == True would pass it."""
    if not (isinstance(value, bool) or value in ("bar", "lines")):
        raise ValueError(f"{key} must be one of true, false, bar, lines; got {value!r}")
    return value


# -- the config classes --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunConfig(Config):
    """train.yaml's top-level keys."""

    prefix: ClassVar[str] = ""
    seed: int = option(0, _seed)
    resume: bool | str = option(False, _resume)
    #: a run directory (or .ckpt) whose weights initialise the model
    init_from: str | None = option(None, _init_from)


@dataclasses.dataclass(frozen=True)
class OptimConfig(Config):
    """AdamW with linear warm-up and a cosine decay (train.yaml's ``optim``; lengen.lit)."""

    prefix: ClassVar[str] = "optim"
    lr: float = option(1.0e-3, interval(0.0, open_low=True))
    weight_decay: float = option(0.1, interval(0.0))
    warmup_steps: int = option(100, integer(minimum=0))
    #: the cosine decays to lr × min_lr_ratio at trainer.max_steps
    min_lr_ratio: float = option(0.1, interval(0.0, 1.0))
    betas: tuple[float, float] | None = option((0.9, 0.98), _betas)


@dataclasses.dataclass(frozen=True)
class EvalConfig(Config):
    """Evaluation after training (``configs/eval/default.yaml``)."""

    prefix: ClassVar[str] = "eval"
    #: a list is used exactly as given (sorted); null: factors × data.len (lengen.config)
    lengths: list[int] | None = option(None)
    factors: list[float] = option((1, 2, 4, 8))
    samples: int = option(512, integer())
    seed: int = option(1234, integer(minimum=0))
    max_tokens_per_batch: int = option(65536, integer())
    decoding: str = option("teacher_forced", one_of(*PROTOCOLS))
    position_draws: int = option(10, integer())
    plot_dpi: int = option(200, integer_in(1, 1200))  # beyond: a figure of GiBs (#34)
    #: the formats each run figure is written in (PNG at plot_dpi; PDF and SVG are vector)
    plot_formats: list[str] = option(("png", "pdf"), _plot_formats)
    #: attention statistics per length, layer and head in results.json (docs/analysis.md)
    diagnostics: bool = option(True, flag())
    #: instances per length the attention diagnostics look at (the first evaluated ones)
    diagnostics_samples: int = option(4, integer())
    #: Effective Remembrance per length (Buitrago Ruiz & Gu 2025; lengen.evaluation.remembrance)
    #: of the diagnostics' instances, in results.json and a figure (a forward pass per start t)
    effrem: bool = option(False, flag())
    protocol: str = option("nonoverlap", one_of(*TEXT_PROTOCOLS))
    stride: int | None = option(None, integer(nullable=True))
    max_tokens: int | None = option(None, integer(nullable=True))
    #: τ of the length-generalisation ratio ρ_τ in results.json (``lengen.results``)
    ratio_thresholds: list[float] = option(RATIO_THRESHOLDS, _ratio_thresholds)


@dataclasses.dataclass(frozen=True)
class DataSeedConfig(Config):
    """The data key every source takes, whatever its class (train.yaml's ``data:`` node; the
    run reads it, ``lengen.build``): the seed of the training stream. The source's own keys pass
    through to its config class."""

    prefix: ClassVar[str] = "data"
    passthrough: ClassVar[bool] = True
    #: null: ``seed``; a seed: the training batches follow it, the model's init follows ``seed``
    seed: int | None = option(None, _data_seed)


@dataclasses.dataclass(frozen=True)
class TrainerConfig(Config):
    """The trainer keys lengen reads or checks (``configs/trainer/*.yaml``); the others are
    Lightning's, passed through (``passthrough``) and checked by Lightning."""

    prefix: ClassVar[str] = "trainer"
    passthrough: ClassVar[bool] = True
    accelerator: str = option("auto", spelled_one_of(*ACCELERATORS))
    devices: int | str | list = option(1, _devices)
    num_nodes: int = option(1, integer())
    strategy: str = option("auto", spelled_one_of(*STRATEGIES))
    precision: str = option("32-true", spelled_one_of(*PRECISIONS))
    #: also the horizon of the learning-rate schedule
    max_steps: int = option(2000, integer())
    #: steps between in-distribution validations (training is one endless epoch)
    val_check_interval: int = option(500, integer())
    check_val_every_n_epoch: int | None = option(None)
    num_sanity_val_steps: int = option(0, integer(minimum=0))
    gradient_clip_val: float | None = option(1.0, interval(0.0, nullable=True))
    log_every_n_steps: int = option(25, integer())
    #: true: bars on a terminal, a line every N steps elsewhere; bar / lines: that form always
    enable_progress_bar: bool | str = option(True, _progress)
    enable_model_summary: bool = option(False, flag())
    #: lengen's own: checkpoints/last.ckpt every N steps (null: at the end and on signals)
    checkpoint_every_n_steps: int | None = option(500, integer(nullable=True))
    #: lengen's own: stop once val/<criterion_metric> reaches it criterion_checks times in a row
    criterion_target: float | None = option(None, interval(0.0, 1.0, open_low=True, nullable=True))
    criterion_metric: str = option("exact_match", one_of(*CRITERION_METRICS))
    criterion_checks: int = option(3, integer())


@dataclasses.dataclass(frozen=True)
class LoggerConfig(Config):
    """A logger's keys (``configs/logger/<name>.yaml``; the factories of ``lengen.loggers``):
    none for ``csv`` and ``none``, whose config this is."""

    prefix: ClassVar[str] = "logger"


@dataclasses.dataclass(frozen=True)
class WandbConfig(LoggerConfig):
    """Weights & Biases (``configs/logger/wandb.yaml``; ``lengen.loggers.wandb``)."""

    project: str = option("lengen", _text())
    #: null: in a -m sweep, the sweep folder's name (the runs of a sweep are grouped)
    group: str | None = option(None, _text(nullable=True))
    run_name: str | None = option(None, _text(nullable=True))
    #: null: ``$WANDB_MODE``, else offline
    mode: str | None = option(None, one_of(*WANDB_MODES, nullable=True))


#: the factories of ``lengen.loggers`` -> their config classes (each factory's ``Options`` slot)
LOGGERS = {"csv": LoggerConfig, "none": LoggerConfig, "wandb": WandbConfig}


def logger_options(target: str | None) -> type[LoggerConfig] | None:
    """The config class of a lengen logger's ``_target_`` (``lengen.loggers.wandb``), found by
    name; None for a logger of the user's (its own constructor checks its keys)."""
    if not isinstance(target, str) or not target.startswith("lengen.loggers."):
        return None
    return LOGGERS.get(target.rpartition(".")[2])
