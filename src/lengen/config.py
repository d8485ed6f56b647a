"""Validation of user input, before any heavy import.

Every check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. Checks that
need the components themselves (a PE's head-dimension rule, say) run when the run builds them,
still before Lightning is imported and before anything is trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from lengen.checks import positive_int

PROTOCOLS = ("teacher_forced", "greedy")
#: Config groups whose choice is a yaml file under configs/<group>/.
GROUPS = ("pe", "model", "data", "trainer", "logger", "eval", "experiment", "debug")
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
#: the _target_ of text data yamls (whose keys validate() checks), and ${lengen_root:}, the
#: lengen checkout, so recipes can name ../shared/data wherever the user runs from
TEXT_DATA_TARGET = "lengen.data.text.TextData"
OmegaConf.register_new_resolver("lengen_root", lambda: str(CONFIG_DIR.parent), replace=True)


class ConfigError(ValueError):
    """Bad user input; the message's first line names the key and the allowed values."""


def group_choices(group: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))


def check_group_overrides(arguments: Sequence[str], config_dir: Path = CONFIG_DIR) -> None:
    """Reject ``group=choice`` command-line overrides naming no yaml (sweeps: each of a,b,c)."""
    for argument in arguments:
        key, sep, value = argument.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or value in ("", "null"):
            continue
        allowed = group_choices(key, config_dir)
        for choice in value.split(","):
            if choice.strip() not in allowed:
                raise ConfigError(
                    f"{key}={choice.strip()}: unknown choice; allowed: {', '.join(allowed)}"
                )


def _int(cfg: DictConfig, key: str, minimum: int = 1) -> int:
    try:
        return positive_int(key, _get(cfg, key), minimum)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _number(
    cfg: DictConfig,
    key: str,
    low: float,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    value = _get(cfg, key)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = value >= low if low_inclusive else value > low
        if ok and high is not None:
            ok = value <= high if high_inclusive else value < high
    if not ok:
        left = "[" if low_inclusive else "("
        right = ("]" if high_inclusive else ")") if high is not None else ")"
        upper = high if high is not None else "inf"
        raise ConfigError(f"{key} must be a number in {left}{low}, {upper}{right}, got {value!r}")
    return float(value)


def _get(cfg: DictConfig, key: str):
    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            raise ConfigError(f"{key} is missing from the config")
        node = node[part]
    return node


def eval_lengths(cfg: DictConfig) -> list[int]:
    """``eval.lengths`` exactly (sorted, unique), or ``eval.factors`` × ``data.len``."""
    train_len = cfg.data.len
    if cfg.eval.lengths is not None:
        lengths = cfg.eval.lengths
        if not isinstance(lengths, ListConfig | list) or not lengths:
            raise ConfigError(
                f"eval.lengths must be null or a non-empty list of positive integers, got {lengths!r}"
            )
        for length in lengths:
            if isinstance(length, bool) or not isinstance(length, int) or length < 1:
                raise ConfigError(f"eval.lengths must hold positive integers, got {length!r}")
        return sorted(set(lengths))
    factors = cfg.eval.factors
    if not isinstance(factors, ListConfig | list) or not factors:
        raise ConfigError(
            f"eval.factors must be a non-empty list of positive numbers, got {factors!r}"
        )
    lengths = set()
    for factor in factors:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
            raise ConfigError(f"eval.factors must hold positive numbers, got {factor!r}")
        length = factor * train_len
        if abs(length - round(length)) > 1e-9 or round(length) < 1:
            raise ConfigError(
                f"eval.factors: {factor} × data.len {train_len} = {length} is not a whole length; "
                f"allowed: factors giving integers >= 1, or explicit eval.lengths"
            )
        lengths.add(int(round(length)))
    return sorted(lengths)


def validate(cfg: DictConfig) -> None:
    """Check every generic user-facing key; raise ConfigError on the first bad one."""
    _int(cfg, "seed", minimum=0)
    if _get(cfg, "resume") not in (False, True):
        raise ConfigError(f"resume must be true or false, got {cfg.resume!r}")
    init_from = _get(cfg, "init_from")
    if init_from is not None and not Path(str(init_from)).exists():
        raise ConfigError(
            f"init_from={init_from}: no such run directory or checkpoint; allowed: null or a "
            f"path to a run directory or .ckpt file"
        )
    _int(cfg, "data.len")
    _int(cfg, "trainer.max_steps")
    validate_trainer(cfg)
    _int(cfg, "model.d_model")
    _int(cfg, "model.n_layers")
    _int(cfg, "model.n_heads")
    _int(cfg, "model.d_ff")
    if cfg.model.d_model % cfg.model.n_heads:
        raise ConfigError(
            f"model.d_model must be divisible by model.n_heads, got {cfg.model.d_model} "
            f"and {cfg.model.n_heads}"
        )
    _number(cfg, "model.dropout", 0.0, 1.0, high_inclusive=False)
    _number(cfg, "optim.lr", 0.0, low_inclusive=False)
    _number(cfg, "optim.weight_decay", 0.0)
    _int(cfg, "optim.warmup_steps", minimum=0)
    _number(cfg, "optim.min_lr_ratio", 0.0, 1.0)
    _int(cfg, "eval.samples")
    _int(cfg, "eval.max_tokens_per_batch")
    _int(cfg, "eval.seed", minimum=0)
    if _get(cfg, "eval.decoding") not in PROTOCOLS:
        raise ConfigError(
            f"eval.decoding must be one of {', '.join(PROTOCOLS)}; got {cfg.eval.decoding!r}"
        )
    eval_lengths(cfg)
    # -- text data (data=text): its own keys, checked by lengen.data.text_prep ----------------
    if cfg.data.get("_target_") == TEXT_DATA_TARGET:
        from lengen.data.text_prep import validate_text_config

        validate_text_config(cfg)


STRATEGIES = ("auto", "ddp", "ddp_find_unused_parameters_true")
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true", "64")


def _choice(cfg: DictConfig, key: str, allowed: Sequence[str]) -> str:
    value = _get(cfg, key)
    if str(value) not in allowed:
        raise ConfigError(f"{key} must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def processes(trainer: DictConfig) -> int | None:
    """Processes a trainer config asks for (devices × nodes); None when Lightning decides."""
    devices = trainer.get("devices", 1)
    nodes = trainer.get("num_nodes", 1)
    if devices in (-1, "-1", "auto"):
        return 1 if trainer.get("accelerator") == "cpu" and nodes == 1 else None
    if isinstance(devices, ListConfig | list):
        return len(devices) * nodes
    if isinstance(devices, str):  # "0,1": device indices
        return len([d for d in devices.split(",") if d.strip()]) * nodes
    return devices * nodes


def validate_trainer(cfg: DictConfig) -> None:
    """The trainer keys users set (Lightning's own checks come late, after a 5 s import)."""
    _choice(cfg, "trainer.accelerator", ACCELERATORS)
    if "strategy" in cfg.trainer:
        _choice(cfg, "trainer.strategy", STRATEGIES)
    _choice(cfg, "trainer.precision", PRECISIONS)
    devices = _get(cfg, "trainer.devices")
    ok = devices in (-1, "auto") or (
        isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1
    )
    ok = ok or isinstance(devices, ListConfig) and all(isinstance(d, int) for d in devices)
    if not ok:
        raise ConfigError(
            f"trainer.devices must be a positive integer, -1, auto or a list of device "
            f"indices, got {devices!r}"
        )
    if "num_nodes" in cfg.trainer:
        _int(cfg, "trainer.num_nodes")
    _int(cfg, "trainer.val_check_interval")  # steps: training is one endless epoch
    _int(cfg, "trainer.log_every_n_steps")
    _int(cfg, "trainer.num_sanity_val_steps", minimum=0)
    if _get(cfg, "trainer.gradient_clip_val") is not None:
        _number(cfg, "trainer.gradient_clip_val", 0.0)
    if cfg.trainer.get("checkpoint_every_n_steps") is not None:
        _int(cfg, "trainer.checkpoint_every_n_steps")
    for key in ("enable_progress_bar", "enable_model_summary"):
        if key in cfg.trainer and cfg.trainer[key] not in (True, False):
            raise ConfigError(f"trainer.{key} must be true or false, got {cfg.trainer[key]!r}")
    if "num_workers" in cfg.data:
        _int(cfg, "data.num_workers", minimum=0)
    world = processes(cfg.trainer)
    batch_size = cfg.data.get("batch_size")
    if world and isinstance(batch_size, int) and batch_size % world:
        raise ConfigError(
            f"data.batch_size={batch_size} is the global batch and must be divisible by the "
            f"{world} processes (trainer.devices × trainer.num_nodes)"
        )
