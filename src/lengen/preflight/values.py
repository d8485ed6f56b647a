"""Values: every generic key against its typed config (``lengen.options``), and the data
source's own keys, without torch; once per config and process.

**Composed twice, validated once.** A ``train.py`` process composes its config twice: once in
the pre-check (``lengen.preflight.command.check_override_keys``), because a refusal must come
before Hydra creates the run directory, and once inside Hydra's main, which composes only after
creating it. The two are the same config, so they are checked once: ``validate`` keeps, per
process, what it built of each resolved config (its content, as config.yaml would hold it), and
the run's own ``validate`` (``lengen.train.run``) gets the same ``Checked`` back without checking
again; the run hands its typed configs on (the optimiser's to ``LitModel``). A refused config is
not kept, so it is refused again every time; the checks that read the disk (``init_from``, text
files) are asked once too, by the pre-check, moments before the run. The components'
constructors still read their own keywords when the objects are built: that builds the
encoding's or model's config, not the run's checks again.
"""

from __future__ import annotations

import dataclasses
import json

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lengen.checks import check_batch_split, positive_int
from lengen.config import eval_lengths
from lengen.errors import ConfigError
from lengen.model.config import ModelConfig, model_config
from lengen.options import (
    DataSeedConfig,
    EvalConfig,
    OptimConfig,
    RunConfig,
    TrainerConfig,
    logger_options,
)
from lengen.preflight.command import group_choices
from lengen.rundir import resolved_config
from lengen.rundir.init_from import check_init_from_shape
from lengen.schema import Config, node_options


@dataclasses.dataclass(frozen=True)
class Checked:
    """The run's typed configs (``lengen.options``) of a config ``validate`` passed. ``model``
    is the model's config class, or for a user's model the keys every model has."""

    run: RunConfig
    model: ModelConfig
    optim: OptimConfig
    eval: EvalConfig
    trainer: TrainerConfig


#: resolved config (json, as config.yaml holds it) -> what ``validate`` built of it, in this
#: process (the module docstring says why)
_CHECKED: dict[str, Checked] = {}


def validate(cfg: DictConfig) -> Checked:
    """Check every generic user-facing key against its typed config (``lengen.options``) and
    the data source's own keys; raise ConfigError on the first bad one. -> the typed configs,
    the same object for the same config within a process (checked the first time only)."""
    key = _content(cfg)
    if key is not None and key in _CHECKED:
        return _CHECKED[key]
    check_required_groups(cfg)
    try:
        result = _validate(cfg)
    except OmegaConfBaseException as error:  # an interpolation that does not resolve
        where = getattr(error, "full_key", None) or unresolvable_key(cfg) or "a value"
        message = str(getattr(error, "msg", None) or error).strip().splitlines()[0]
        raise ConfigError(
            f"{where}: cannot be resolved ({message}); allowed: a value, or an interpolation "
            "that resolves (${oc.env:VAR} of a variable that is set, ${key} of another key)"
        ) from None
    if key is not None:
        _CHECKED[key] = result
    return result


#: the groups every run needs, which ~group would remove (train.yaml's shared options of a
#: group stay: a group's choice is there when its ``name`` is)
REQUIRED_GROUPS = ("pe", "model", "data", "trainer", "eval")


def check_required_groups(cfg: DictConfig) -> None:
    """Refuse a config without one of the groups every run reads (``~pe`` removes it)."""
    for group in REQUIRED_GROUPS:
        node = cfg.get(group)
        if not isinstance(node, DictConfig) or "name" not in node:
            choices = group_choices(group)
            allowed = f"{group}=<one of {', '.join(choices)}>" if choices else f"{group}.<key>=…"
            raise ConfigError(
                f"{group}: removed, but every run needs it; allowed: {allowed}"
                + (" (pe=nope for no encoding)" if group == "pe" else "")
            )


def unresolvable_key(node, prefix: str = "") -> str | None:
    """The first key (dotted) of ``node`` whose value does not resolve, or None."""
    for key in node.keys() if isinstance(node, DictConfig) else range(len(node)):
        child = node._get_node(key)
        if isinstance(child, (DictConfig, ListConfig)) and not child._is_interpolation():
            if (found := unresolvable_key(child, f"{prefix}{key}.")) is not None:
                return found
            continue
        try:
            node[key]
        except OmegaConfBaseException:
            return f"{prefix}{key}"
    return None


def _content(cfg: DictConfig) -> str | None:
    """What makes two configs the same for ``validate``: the resolved config without ``hydra``
    (where the run writes). None when it does not resolve: checked (and refused) every time."""
    try:
        return json.dumps(resolved_config(cfg), sort_keys=True, default=repr)
    except OmegaConfBaseException:
        return None


def _validate(cfg: DictConfig) -> Checked:
    top = {key: cfg.get(key) for key in ("seed", "resume", "init_from")}
    run = checked(RunConfig, OmegaConf.create(top))
    _checked(positive_int, "data.len", cfg.data.get("len"))
    checked(DataSeedConfig, cfg.data)
    trainer = checked(TrainerConfig, cfg.trainer)
    if "num_workers" in cfg.data:
        _checked(positive_int, "data.num_workers", cfg.data.num_workers, 0)
    world = processes(cfg.trainer)  # None: Lightning decides; train checks it then
    batch_size = cfg.data.get("batch_size")
    if world and isinstance(batch_size, int):
        _checked(check_batch_split, batch_size, world)
    options = model_config(cfg.model.get("_target_"))
    if options is None:  # a user's model: the keys every model has (its own: its constructor)
        node = OmegaConf.masked_copy(
            cfg.model, [k for k in ModelConfig.option_names() if k in cfg.model]
        )
        model = _checked(ModelConfig.from_keys, node_options(OmegaConf.to_container(node)))
    else:
        model = checked(options, cfg.model)
    _checked(model.check)
    _checked(check_init_from_shape, cfg)  # the base run's config.yaml, before torch loads it
    optim = checked(OptimConfig, cfg.optim)
    evaluation = checked(EvalConfig, cfg.eval)
    # the logger's keys (a logger of the user's: its own constructor checks them)
    logger = logger_options(cfg.logger.get("_target_")) if "logger" in cfg else None
    if logger is not None:
        checked(logger, cfg.logger)
    eval_lengths(cfg)
    # the data source checks its own keys (text: files, tokenizer, protocol), found through its
    # _target_ as Hydra will instantiate it (lengen.data.source.DataSource.validate_config)
    from hydra.utils import get_class

    get_class(cfg.data._target_).validate_config(cfg)
    return Checked(run=run, model=model, optim=optim, eval=evaluation, trainer=trainer)


def checked(options: type[Config], node) -> Config:
    """A component's typed config from its yaml node, checked (ConfigError naming the key)."""
    keys = node_options(OmegaConf.to_container(node, resolve=True) if node is not None else {})
    return _checked(
        options.from_keys, keys, owner=node.get("_target_", "").rpartition(".")[2] or None
    )


def _checked(check, *args, **kwargs):
    """A shared check (``lengen.checks``) whose ValueError is the user's input error here ->
    what the check returns."""
    try:
        return check(*args, **kwargs)
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
