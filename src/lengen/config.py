"""Validation of user input, before any heavy import.

Every check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. The
components' own checks (a PE's head-dimension rule, a task's alphabet) follow, still without
torch (``lengen.build.check_components``), before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from lengen.checks import ConfigError, check_batch_split, check_heads, positive_int
from lengen.identity import run_id

PROTOCOLS = ("teacher_forced", "greedy")
#: validation metrics a run can be trained to (``trainer.criterion_metric``)
CRITERION_METRICS = ("exact_match", "accuracy")
#: Config groups whose choice is a yaml file under configs/<group>/.
GROUPS = ("pe", "model", "data", "trainer", "logger", "eval", "experiment", "debug")
#: the lengen checkout
ROOT = Path(__file__).resolve().parents[2]
#: the config root: lengen's configs/, or ``LENGEN_CONFIG_DIR`` (a copy holding your own
#: encodings and tasks beside lengen's; train.py reads it too, docs/pe.md "Adding an encoding")
CONFIG_DIR = Path(os.environ.get("LENGEN_CONFIG_DIR") or ROOT / "configs")
#: ${lengen_root:}, the lengen checkout, so recipes can name ../shared/data wherever the user
#: runs from
OmegaConf.register_new_resolver("lengen_root", lambda: str(ROOT), replace=True)

#: ``resume``: false (a fresh run), true (continue an interrupted run), auto (continue it if it
#: has a checkpoint, start it otherwise, report it done if finished: sweeps that fill gaps)
RESUME_MODES = (False, True, "auto")

#: a few random hex digits per process: default run directories of two runs started in the same
#: second with the same config differ by it
_NONCE = __import__("secrets").token_hex(2)
# ${lengen_run_id:}: what the run trains (lengen.identity), in sweep directory names
OmegaConf.register_new_resolver("lengen_run_id", lambda *, _root_: run_id(_root_), replace=True)
OmegaConf.register_new_resolver("lengen_nonce", lambda: _NONCE, replace=True)

__all__ = ["ConfigError", "eval_lengths", "validate"]


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
    if _int(cfg, "seed", minimum=0) >= 2**32:  # numpy and Lightning seed with 32 bits
        raise ConfigError(f"seed must be an integer in [0, 2^32 - 1], got {cfg.seed}")
    if _get(cfg, "resume") not in RESUME_MODES:
        raise ConfigError(f"resume must be true, false or auto, got {cfg.resume!r}")
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
    _checked(check_heads, cfg.model.d_model, cfg.model.n_heads)
    _number(cfg, "model.dropout", 0.0, 1.0, high_inclusive=False)
    _number(cfg, "optim.lr", 0.0, low_inclusive=False)
    _number(cfg, "optim.weight_decay", 0.0)
    _int(cfg, "optim.warmup_steps", minimum=0)
    _number(cfg, "optim.min_lr_ratio", 0.0, 1.0)
    betas = cfg.optim.get("betas")
    if betas is not None and not (
        isinstance(betas, ListConfig | list)
        and len(betas) == 2
        and all(
            isinstance(b, int | float) and not isinstance(b, bool) and 0 <= b < 1 for b in betas
        )
    ):
        raise ConfigError(f"optim.betas must be two numbers in [0, 1), got {betas!r}")
    _int(cfg, "eval.samples")
    _int(cfg, "eval.max_tokens_per_batch")
    _int(cfg, "eval.seed", minimum=0)
    if "position_draws" in cfg.eval:
        _int(cfg, "eval.position_draws")
    if "plot_dpi" in cfg.eval:
        _int(cfg, "eval.plot_dpi")
    if _get(cfg, "eval.decoding") not in PROTOCOLS:
        raise ConfigError(
            f"eval.decoding must be one of {', '.join(PROTOCOLS)}; got {cfg.eval.decoding!r}"
        )
    eval_lengths(cfg)
    # the data source checks its own keys (text: files, tokenizer, protocol), found through its
    # _target_ as Hydra will instantiate it (lengen.data.source.DataSource.validate_config)
    from hydra.utils import get_class

    get_class(cfg.data._target_).validate_config(cfg)


def _checked(check, *args) -> None:
    """A shared check (``lengen.checks``) whose ValueError is the user's input error here."""
    try:
        check(*args)
    except ValueError as error:
        raise ConfigError(str(error)) from None


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
    if cfg.trainer.get("criterion_target") is not None:
        _number(cfg, "trainer.criterion_target", 0.0, 1.0, low_inclusive=False)
        _choice(cfg, "trainer.criterion_metric", CRITERION_METRICS)
        _int(cfg, "trainer.criterion_checks")
    for key in ("enable_progress_bar", "enable_model_summary"):
        if key in cfg.trainer and cfg.trainer[key] not in (True, False):
            raise ConfigError(f"trainer.{key} must be true or false, got {cfg.trainer[key]!r}")
    if "num_workers" in cfg.data:
        _int(cfg, "data.num_workers", minimum=0)
    world = processes(cfg.trainer)  # None: Lightning decides; train checks it then
    batch_size = cfg.data.get("batch_size")
    if world and isinstance(batch_size, int):
        _checked(check_batch_split, batch_size, world)


def pe_options_changed(cfg: DictConfig, config_dir: Path = CONFIG_DIR) -> dict:
    """The ``pe.*`` options whose values differ from the encoding's defaults (its yaml over
    train.yaml's shared options), e.g. ``{"layout": "half", "base": 500.0}``: what tells a
    variant apart in headers, titles and legends."""
    path = config_dir / "pe" / f"{cfg.pe.name}.yaml"
    if not path.is_file():
        return {}
    shared = OmegaConf.load(config_dir / "train.yaml").get("pe", {})
    defaults = OmegaConf.to_container(OmegaConf.merge(shared, OmegaConf.load(path)))
    current = OmegaConf.to_container(cfg.pe, resolve=True)
    return {
        key: value
        for key, value in current.items()
        if key not in ("_target_", "_partial_", "name") and defaults.get(key, value) != value
    }


def run_label(cfg: DictConfig, protocol: str, tag: str | None = None) -> str:
    """One line naming a run and everything that sets it apart: task · model · pe (changed
    options) · protocol · seed (· tag), e.g. ``copy · decoder · pe=rope (layout=half) ·
    greedy · seed 0``."""
    options = ", ".join(f"{k}={v}" for k, v in pe_options_changed(cfg).items())
    pe = f"pe={cfg.pe.name}" + (f" ({options})" if options else "")
    parts = [str(cfg.data.name), str(cfg.model.name), pe, protocol, f"seed {cfg.seed}"]
    return " · ".join(parts + ([f"tag {tag}"] if tag else []))
