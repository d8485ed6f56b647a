"""Validation of user input, before any heavy import.

Every check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. Checks that
need the components themselves (a PE's head-dimension rule, say) run when the run builds them,
still before Lightning is imported and before anything is trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig

from lengen.checks import positive_int

PROTOCOLS = ("teacher_forced",)
#: Config groups whose choice is a yaml file under configs/<group>/.
GROUPS = ("pe", "model", "data", "trainer", "logger", "eval", "experiment", "debug")
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


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
    if cfg.resume:
        raise ConfigError("resume=true is not supported yet; allowed: resume=false")
    init_from = _get(cfg, "init_from")
    if init_from is not None and not Path(str(init_from)).exists():
        raise ConfigError(
            f"init_from={init_from}: no such run directory or checkpoint; allowed: null or a "
            f"path to a run directory or .ckpt file"
        )
    _int(cfg, "data.len")
    _int(cfg, "trainer.max_steps")
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
