"""Can this command line run? Everything that asks — keys, values, components, devices, memory
— before anything is written.

Each check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. In the
order ``precheck`` asks:

* **keys** (``check_group_overrides``, ``check_override_keys``): every ``group=choice`` names a
  yaml, every override names a key that exists;
* **values** (``validate``): every generic key against its typed config (``lengen.options``),
  and the data source's own keys, without torch;
* **the run directory's rules** (``lengen.rundir``);
* **devices and memory** (``check_resources``);
* **components** (``check_components``): the data source's, the encoding's per stack of the
  model, without torch for lengen's own; others are built on the meta device
  (``check_by_building``).

**Composed twice, validated once.** A ``train.py`` process composes its config twice: once here
(``check_override_keys``), because a refusal must come before Hydra creates the run directory,
and once inside Hydra's main, which composes only after creating it. The two are the same
config, so they are checked once: ``validate`` keeps, per process, what it built of each
resolved config (its content, as config.yaml would hold it), and the run's own ``validate``
(``lengen.train.run``) gets the same ``Checked`` back without checking again; the run hands its
typed configs on (the optimiser's to ``LitModel``). A refused config is not kept, so it is
refused again every time; the checks that read the disk (``init_from``, text files) are asked
once too, by precheck, moments before the run. The components' constructors still read their
own keywords when the objects are built: that builds the encoding's or model's config, not the
run's checks again.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lengen.build import build, build_data, user_errors
from lengen.checks import ConfigError, check_batch_split, positive_int
from lengen.config import CONFIG_DIR, GROUPS, eval_lengths
from lengen.options import (
    DataSeedOptions,
    EvalOptions,
    ModelOptions,
    OptimOptions,
    RunOptions,
    TrainerOptions,
    model_options,
)
from lengen.rundir import RunDirectory, is_rank_zero, resolved_config
from lengen.schema import Options, node_options


# -- the command line: everything, before Hydra writes anything --------------------------------
def precheck(arguments: Sequence[str]) -> int | None:
    """Everything a command line can be refused for, before Hydra writes anything (it creates
    the run directory and its log first): unknown groups and keys, every value (``validate``),
    every component's own checks (``check_components``: without torch for lengen's own; others
    built, the model on the meta device), and the run directory's rules. -> an exit status to
    stop with now (0: the run is already done), or None to go on. Raises ConfigError (one line
    naming the key)."""
    from hydra.utils import get_class

    check_group_overrides(arguments)
    configs = check_override_keys(arguments)
    values = dict(a.partition("=")[::2] for a in arguments if "=" in a and not a.startswith("-"))
    run_dir = values.get("hydra.run.dir")
    if run_dir is not None and not run_dir.strip("'\" "):
        raise ConfigError("hydra.run.dir: empty; allowed: a directory path (or leave it unset)")
    for cfg in configs:
        validate(cfg)
    sweeping = bool({"-m", "--multirun"} & set(arguments))
    own_subdir = any(a.partition("=")[0].lstrip("+~") == "hydra.sweep.subdir" for a in arguments)
    if sweeping and not own_subdir:
        check_shared_directories(configs)
    # the other ranks of a multi-process run re-run this command into rank 0's directory
    if configs and run_dir is not None and not sweeping and is_rank_zero():
        directory = RunDirectory(run_dir.strip("'\""))
        if directory.finished(configs[0]) is not None:  # resume on a finished run: done
            return 0
        directory.check_start(configs[0])
    for cfg in configs:
        check_resources(cfg)
        # a component of the user's: its constructor checks it (text reads its corpus at run
        # time, so the build checks it then)
        if not check_components(cfg) and get_class(cfg.data._target_).cheap_to_build:
            check_by_building(cfg)
    return None


def check_shared_directories(configs: list[DictConfig]) -> None:
    """Refuse a -m sweep two of whose jobs would share a run directory: its default name
    (``hydra.sweep.subdir``) says what a run trains and its seed, so jobs that differ only in
    evaluation, logging or devices would land in one directory, and the second would find the
    first's results. ``configs`` are ``check_override_keys``' trials: the first values, then each
    swept value once."""
    from lengen.identity import flatten, run_id

    first = configs[0]
    place = (run_id(first), first.seed)
    before = flatten(resolved_config(first))
    for other in configs[1:]:
        if (run_id(other), other.seed) != place:
            continue
        after = flatten(resolved_config(other))
        keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if keys:  # (no keys: the same value given twice)
            raise ConfigError(
                f"{keys[0]}: the sweep's jobs for its values would share one run directory (its "
                f"name says what a run trains and its seed; {keys[0]} changes neither); allowed: "
                f"one value of {keys[0]} per sweep (and hydra.sweep.dir), or python eval.py "
                f"run=<run dir> {keys[0]}=… after the sweep"
            )


# -- keys: group choices and override keys -----------------------------------------------------
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


def check_override_keys(arguments: Sequence[str], config_dir: Path | None = None) -> list:
    """Compose the config with the command line's overrides, as Hydra will, and turn a key that
    does not exist (or an override Hydra cannot parse) into one ConfigError naming the key.
    -> the composed configs (without ``hydra``), one per trial below.

    In a -m sweep each swept value is tried once (the others at their first value), so a key
    that exists for one group choice but not another is caught before any run starts.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    flags = {"-m", "--multirun"}
    # a deletion (~key) needs no value: it must reach the composition all the same
    overrides = [a for a in arguments if not a.startswith("-") and ("=" in a or a[:1] == "~")]
    if any(a.startswith("-") and a not in flags for a in arguments):
        return []  # Hydra's own flags (--help, --cfg, …): let Hydra handle them
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
    except Exception as error:  # noqa: BLE001 - Hydra's parse errors are bad input
        first = str(error).strip().splitlines()[0]
        raise ConfigError(f"cannot parse the command line: {first}") from None
    trials = [[_first_value(o) for o in parsed]]
    for index, override in enumerate(parsed):
        if override.is_sweep_override() and not override.key_or_group.startswith("hydra"):
            for value in list(override.sweep_string_iterator())[1:]:
                trial = list(trials[0])
                trial[index] = f"{override.get_key_element()}={value}"
                trials.append(trial)
    configs = []
    with initialize_config_dir(str(config_dir or CONFIG_DIR), version_base="1.3"):
        for trial in trials:
            try:
                configs.append(compose("train", overrides=trial))
            except Exception as error:  # noqa: BLE001 - reworded below
                raise _override_error(error, trial) from None
    return configs


def _first_value(override) -> str:
    if not override.is_sweep_override():
        return override.input_line
    first = next(iter(override.sweep_string_iterator()))
    return f"{override.get_key_element()}={first}"


def _override_error(error: Exception, trial: list[str]) -> ConfigError:
    text = str(error)
    match = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", text)
    if match is None:
        match = re.search(r"Key '([^']+)' is not in struct", text)
    if match is None:
        return ConfigError(text.strip().splitlines()[0])
    key = match.group(1)
    parent, _, leaf = key.rpartition(".")
    allowed = _keys_under(parent, [t for t in trial if not t.startswith(f"{key}=")])
    where = f"under {parent}" if parent else "at the top level"
    return ConfigError(
        f"{key}: no such key; allowed {where}: {', '.join(allowed) or 'none'} "
        f"(a new key needs +{key}=…)"
    )


def _keys_under(parent: str, trial: list[str]) -> list[str]:
    from hydra import compose

    try:
        cfg = compose("train", overrides=trial)
    except Exception:  # noqa: BLE001 - another bad override: no list, the key is still named
        return []
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return sorted(str(k) for k in node) if isinstance(node, DictConfig) else []


# -- values: every generic key against its typed config, once per config and process ----------
@dataclasses.dataclass(frozen=True)
class Checked:
    """The run's typed configs (``lengen.options``) of a config ``validate`` passed. ``model``
    is the model's config class, or for a user's model the keys every model has."""

    run: RunOptions
    model: ModelOptions
    optim: OptimOptions
    eval: EvalOptions
    trainer: TrainerOptions


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
    result = _validate(cfg)
    if key is not None:
        _CHECKED[key] = result
    return result


def _content(cfg: DictConfig) -> str | None:
    """What makes two configs the same for ``validate``: the resolved config without ``hydra``
    (where the run writes). None when it does not resolve: checked (and refused) every time."""
    try:
        return json.dumps(resolved_config(cfg), sort_keys=True, default=repr)
    except OmegaConfBaseException:
        return None


def _validate(cfg: DictConfig) -> Checked:
    top = {key: cfg.get(key) for key in ("seed", "resume", "init_from")}
    run = checked(RunOptions, OmegaConf.create(top))
    _checked(positive_int, "data.len", cfg.data.get("len"))
    checked(DataSeedOptions, cfg.data)
    trainer = checked(TrainerOptions, cfg.trainer)
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
        model = _checked(ModelOptions.from_keys, node_options(OmegaConf.to_container(node)))
    else:
        model = checked(options, cfg.model)
    _checked(model.check)
    optim = checked(OptimOptions, cfg.optim)
    evaluation = checked(EvalOptions, cfg.eval)
    eval_lengths(cfg)
    # the data source checks its own keys (text: files, tokenizer, protocol), found through its
    # _target_ as Hydra will instantiate it (lengen.data.source.DataSource.validate_config)
    from hydra.utils import get_class

    get_class(cfg.data._target_).validate_config(cfg)
    return Checked(run=run, model=model, optim=optim, eval=evaluation, trainer=trainer)


def checked(options: type[Options], node) -> Options:
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


# -- components: each one's own checks -----------------------------------------------------------
def check_components(cfg: DictConfig) -> bool:
    """Every component's own checks of a config, before a run directory exists: the data
    source's, then the encoding's for each stack of the model (``lengen.pe.options``; the
    model's own keys are ``validate``'s, ``lengen.options``) without importing torch, so a
    refusal takes well under 2 s; then drawing a few training instances (``check_sampling``,
    which imports torch). A source that is not cheap to build (text reads its corpus) is not
    built: its keys are checked by ``validate`` and the encoding learns its positions from
    ``planned_positions``. Raises ConfigError naming the key. -> True when this covered the
    config; False when a component is not lengen's (a user's encoding or model, which its
    constructor checks) or the kernel option is ``flex`` (its policy reads the built encoding
    and the device): ``check_by_building`` then runs their checks."""
    from hydra.utils import get_class

    from lengen.pe.options import check_encoding

    model = cfg.model
    with user_errors():
        data, positions = (
            None,
            get_class(cfg.data._target_).planned_positions(cfg, eval_lengths(cfg)),
        )
        if positions is None:
            data, _, positions = build_data(cfg)
        options = model_options(model._target_)
        node = OmegaConf.to_container(cfg.pe, resolve=True)
        sizes = dict(d_model=model.d_model, n_heads=model.n_heads, n_layers=model.n_layers)
        known = [
            check_encoding(node, causal=causal, **sizes, **positions)
            for causal in (options.stacks if options is not None else ())
        ]
        if data is not None:
            data.check_sampling()
    return all(known) and options is not None and model.get("attention") != "flex"


def check_by_building(cfg: DictConfig) -> None:
    """The checks ``check_components`` leaves to the components themselves: build them on the
    meta device (their constructors check their keys), and ask the kernel policy whether
    ``model.attention`` can train on the device the run will train on."""
    _, model, _ = build(cfg, meta=True)
    accelerator = str(cfg.trainer.accelerator)
    cuda = accelerator in ("gpu", "cuda") or (accelerator == "auto" and cuda_available())
    with user_errors():
        model.check_kernel("cuda" if cuda else "mps" if accelerator == "mps" else "cpu")


# -- what the machine can run: checked before anything is built ------------------------------
def check_resources(cfg: DictConfig) -> None:
    """The devices and memory a config asks for exist here (ConfigError naming the key)."""
    check_devices(cfg)
    check_memory(cfg)


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, without importing torch where no GPU device node exists
    (NVIDIA's, AMD's ROCm or WSL's), where the answer is False: a refusal stays fast."""
    import os

    if not any(
        os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
    ):
        return False
    import torch

    return torch.cuda.is_available()


def check_devices(cfg: DictConfig) -> None:
    """A GPU asked for where there is none: say so now, not in Lightning's words later."""
    accelerator = str(cfg.trainer.accelerator)
    if accelerator in ("gpu", "cuda") and not cuda_available():
        raise ConfigError(
            f"trainer.accelerator={cfg.trainer.accelerator}: no CUDA GPU is visible here; "
            f"allowed: cpu, or auto (the GPU when there is one)"
        )
    if accelerator == "mps":
        import torch

        if not torch.backends.mps.is_available():
            raise ConfigError(
                "trainer.accelerator=mps: MPS is not available here; allowed: cpu, auto"
            )


def available_memory(cfg: DictConfig) -> tuple[int, str]:
    """(bytes, where) the run can use: the GPU's total memory where it trains on one, else the
    memory Linux reports available (MemAvailable); (0, "") when unknown."""
    if str(cfg.trainer.accelerator) in ("gpu", "cuda", "auto") and cuda_available():
        import torch

        return torch.cuda.mem_get_info()[1], "GPU"
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "CPU"
    except OSError:
        pass
    return 0, ""


def config_axes(cfg: DictConfig) -> int:
    """Axes of the data's positions, read from the config without building anything: the
    task class's ``axes`` (grid tasks 2, volumes 3); 1 for text and sequence tasks."""
    from hydra.utils import get_class

    task = cfg.data.get("task")
    if task is None or "_target_" not in task:
        return 1
    return int(getattr(get_class(task._target_), "axes", 1))


def check_memory(cfg: DictConfig) -> None:
    """Refuse, before building anything, sizes that cannot fit: a training step's activations
    (a lower bound: every instance at least ``data.len`` positions long) and one instance at the
    longest evaluation length. Without this, ``data.len=1000000000`` was killed by the kernel
    after 97 s with no message."""
    available, where = available_memory(cfg)
    if not available:
        return
    model, gib = cfg.model, 2**30
    axes = config_axes(cfg)
    per_token = 12 * model.d_model + 2 * model.d_ff  # floats one layer keeps for backward
    tokens = cfg.data.len**axes  # grids: data.len is the side (shapes: pixels, an upper bound)
    train = 4 * cfg.data.batch_size * tokens * model.n_layers * per_token
    if train > available:
        shown = f"{cfg.data.len}^{axes} = {tokens:,}" if axes > 1 else f"{tokens}"
        raise ConfigError(
            f"data.len={cfg.data.len}: a training step needs at least {train / gib:,.1f} GiB of "
            f"activations (data.batch_size {cfg.data.batch_size} × {shown} positions × "
            f"{model.n_layers} layers), more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: a smaller data.len, data.batch_size or model"
        )
    longest = max(eval_lengths(cfg))
    evaluation = 4 * longest**axes * (8 * model.d_model + model.d_ff) * 2  # one instance, no grad
    if evaluation > available:
        key = "eval.lengths" if cfg.eval.lengths is not None else "eval.factors"
        raise ConfigError(
            f"{key}: evaluating length {longest} needs at least {evaluation / gib:,.1f} GiB even "
            f"one instance at a time, more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: shorter evaluation lengths"
        )
