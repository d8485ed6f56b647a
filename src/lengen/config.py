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

from lengen.checks import ConfigError, check_batch_split, positive_int
from lengen.identity import run_id
from lengen.options import (
    EvalOptions,
    ModelOptions,
    OptimOptions,
    RunOptions,
    TrainerOptions,
    model_options,
)
from lengen.schema import Options, node_options

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


def checked(options: type[Options], node) -> Options:
    """A component's typed config from its yaml node, checked (ConfigError naming the key)."""
    keys = node_options(OmegaConf.to_container(node, resolve=True) if node is not None else {})
    try:
        return options.from_keys(keys, owner=node.get("_target_", "").rpartition(".")[2] or None)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def validate(cfg: DictConfig) -> None:
    """Check every generic user-facing key against its typed config (``lengen.options``);
    raise ConfigError on the first bad one."""
    top = {key: cfg.get(key) for key in ("seed", "resume", "init_from")}
    checked(RunOptions, OmegaConf.create(top))
    _checked(positive_int, "data.len", cfg.data.get("len"))
    checked(TrainerOptions, cfg.trainer)
    if "num_workers" in cfg.data:
        _checked(positive_int, "data.num_workers", cfg.data.num_workers, 0)
    world = processes(cfg.trainer)  # None: Lightning decides; train checks it then
    batch_size = cfg.data.get("batch_size")
    if world and isinstance(batch_size, int):
        _checked(check_batch_split, batch_size, world)
    options = model_options(cfg.model.get("_target_"))
    if options is None:  # a user's model: the keys every model has (its own: its constructor)
        node = OmegaConf.masked_copy(
            cfg.model, [k for k in ModelOptions.option_names() if k in cfg.model]
        )
        _checked(ModelOptions.from_keys(node_options(OmegaConf.to_container(node))).check)
    else:
        _checked(checked(options, cfg.model).check)
    checked(OptimOptions, cfg.optim)
    checked(EvalOptions, cfg.eval)
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
