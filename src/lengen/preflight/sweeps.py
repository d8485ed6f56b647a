"""A sweep's combinations. A -m sweep is checked with each swept value tried once (the others
at their first value: ``check_override_keys``), and one refusal refuses the whole command. With
``hydra.sweeper.skip_invalid=true`` on the command line, ``check_sweep_jobs`` instead composes
every job as Hydra's basic sweeper lists them and asks each the checks of a single run
(``check_job``): a refused job is recorded with its one-line reason, and lengen's sweeper
(``hydra_plugins.lengen_sweeper``) leaves it out of the sweep (``job_refusal``); keys that do not
exist, and a sweep with no job left, still refuse the whole command. Two jobs that would share
a run directory refuse the sweep (``check_shared_directories`` for the default folder names,
``check_sweep_subdirs`` for a ``hydra.sweep.subdir`` of the user's)."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from lengen.errors import ConfigError
from lengen.preflight.command import Command, _override_error, parse_overrides
from lengen.preflight.components import check_by_building, check_components
from lengen.preflight.hydra_private import composing, split_sweep
from lengen.preflight.launch import check_launch
from lengen.preflight.resources import check_resources
from lengen.preflight.values import validate
from lengen.rundir import resolved_config

#: the sweeper's key (configs/hydra/sweeper/lengen.yaml): true runs a -m sweep's valid
#: combinations and skips the refused ones (hydra_plugins.lengen_sweeper; docs/cluster.md)
SKIP_INVALID = "hydra.sweeper.skip_invalid"

#: a job's overrides (as Hydra's basic sweeper lists them) -> its refusal, or None where it
#: passed: what ``check_sweep_jobs`` found in this process, for the sweeper to skip by
_SWEEP_JOBS: dict[tuple[str, ...], str | None] = {}


def skip_invalid(value) -> bool:
    """``hydra.sweeper.skip_invalid`` as given on the command line (None: not given)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{SKIP_INVALID}={value}: allowed: true, false")
    return text == "true"


def sweep_jobs(overrides: Sequence[str]) -> list[list[str]]:
    """The jobs of a -m sweep, each its list of overrides, as Hydra's basic sweeper makes them
    (the cartesian product of every a,b,c, in its order) from the command line's overrides
    without ``hydra``'s."""
    parsed = parse_overrides(overrides)
    task = [o for o in parsed if not o.is_hydra_override()]
    return [job for batch in split_sweep(task) for job in batch]


def check_sweep_jobs(command: Command, cluster: bool) -> list[DictConfig]:
    """``hydra.sweeper.skip_invalid=true``: compose every job of the sweep (a key that does not
    exist still refuses the whole command) and ask each the checks of a single run
    (``check_job``); a job they refuse is recorded with its one-line reason, for the sweeper
    to skip. -> the configs that passed. Raises ConfigError when none did."""
    from hydra import compose

    hydra_overrides = [
        a for a in command.overrides if a.lstrip("+~").startswith(("hydra.", "hydra/"))
    ]
    jobs = sweep_jobs(command.overrides)
    passed, refused = [], []
    with composing(command.config_dirs):
        for job in jobs:
            trial = [*hydra_overrides, *job]
            try:
                cfg = compose(command.config_name, overrides=trial)
            except Exception as error:  # noqa: BLE001 - reworded below
                raise _override_error(error, trial, command.config_name) from None
            try:
                check_job(cfg, cluster)
            except ConfigError as error:
                _SWEEP_JOBS[tuple(job)] = str(error)
                refused.append((job, str(error)))
            else:
                _SWEEP_JOBS[tuple(job)] = None
                passed.append(cfg)
    if not passed:
        job, reason = refused[0]
        raise ConfigError(
            f"{SKIP_INVALID}=true: every one of the sweep's {len(jobs)} combinations is "
            f"refused, e.g. {' '.join(job)}: {reason}"
        )
    return passed


def check_job(cfg: DictConfig, cluster: bool) -> None:
    """The checks ``precheck`` asks of each config, for one job of a sweep (ConfigError), its
    evaluation's bound last (``lengen.preflight.evaluations.check_sweep_evaluations``: so
    ``skip_invalid`` skips a job whose evaluation a single run would refuse)."""
    from hydra.utils import get_class

    from lengen.preflight.evaluations import check_sweep_evaluations

    validate(cfg)
    check_launch(cfg, True, cluster)
    check_resources(cfg)
    if not check_components(cfg) and get_class(cfg.data._target_).cheap_to_build:
        check_by_building(cfg)
    check_sweep_evaluations([cfg])


def job_refusal(job: Sequence[str], load, cluster: bool) -> str | None:
    """Why the sweeper skips a job: its refusal as ``check_sweep_jobs`` recorded it in this
    process, else the checks asked now of ``load()``, its composed config (a sweep started
    without train.py's pre-check) -> the one-line reason, or None when it can run."""
    key = tuple(job)
    if key not in _SWEEP_JOBS:
        try:
            check_job(load(), cluster)
            _SWEEP_JOBS[key] = None
        except ConfigError as error:
            _SWEEP_JOBS[key] = str(error)
    return _SWEEP_JOBS[key]


def checked_jobs(jobs: Sequence[Sequence[str]]) -> bool:
    """Whether this process composed and checked every one of ``jobs`` already."""
    return all(tuple(job) in _SWEEP_JOBS for job in jobs)


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


def check_sweep_subdirs(command: Command) -> bool:
    """Refuse a -m sweep whose ``hydra.sweep.subdir`` gives two of its jobs one folder (the
    second would find the first's run: refused, or with ``resume=auto`` taken for it): every
    job's subdir resolved as Hydra resolves it for that job, whoever set it (the command line,
    an experiment, a config folder of the user's). -> False where the subdir is lengen's
    default, whose names ``check_shared_directories`` checks from the trials (every job
    composed would cost a compose each). Each group choice is composed once; a job's plain
    ``key=value`` overrides are applied to a copy, as Hydra applies them after composing."""
    from hydra import compose

    from lengen.config import CONFIG_DIR

    hydra_overrides = [
        a for a in command.overrides if a.lstrip("+~").startswith(("hydra.", "hydra/"))
    ]
    jobs = sweep_jobs(command.overrides)
    shipped = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "hydra" / "default.yaml"))
    default = shipped["sweep"]["subdir"]  # (to_container leaves interpolations as written)
    composed: dict[tuple[str, ...], DictConfig] = {}
    seen: dict[str, list[str]] = {}
    with composing(command.config_dirs):
        for number, job in enumerate(jobs):
            values = [o for o in parse_overrides(job) if _plain_value(o, command.config_dirs)]
            key = tuple(o for o in job if o not in {v.input_line for v in values})
            if key not in composed:
                trial = [*hydra_overrides, *key]
                try:  # (with the hydra node: a hydra.* override is applied here first)
                    composed[key] = compose(
                        command.config_name, overrides=trial, return_hydra_config=True
                    )
                except Exception as error:  # noqa: BLE001 - reworded below
                    raise _override_error(error, trial, command.config_name) from None
            raw = str(OmegaConf.to_container(composed[key].hydra.sweep, resolve=False)["subdir"])
            if raw == default:
                return False
            if "hydra.job.num" in raw or "hydra.job.id" in raw:
                return True  # a number of each job's own: no two alike
            subdir = _job_subdir(composed[key], values, job, number, raw)
            if subdir in seen:
                swept = [o for o in job if o not in seen[subdir]] or job
                named = swept[0].partition("=")[0].lstrip("+~")
                named += ".name" if (command.config_dirs[-1] / named).is_dir() else ""
                earlier = [o for o in seen[subdir] if o not in job] or seen[subdir]
                raise ConfigError(
                    f"hydra.sweep.subdir={raw}: the sweep's jobs {' '.join(earlier)} and "
                    f"{' '.join(swept)} would share one run directory ({subdir}), and the second "
                    f"would find the first's run; allowed: a subdir that differs for every job "
                    f"(naming each swept key, e.g. ${{{named}}}), or "
                    f"hydra.sweep.subdir left at its default"
                )
            seen[subdir] = job
    return True


def _plain_value(override, config_dirs) -> bool:
    """Whether an override sets a value (``seed=1``), which Hydra applies after composing, and
    not a group's choice or an addition or deletion, which change what is composed."""
    if override.is_add() or override.is_force_add() or override.is_delete():
        return False
    group = override.key_or_group
    return "/" not in group and not any((folder / group).is_dir() for folder in config_dirs)


def _job_subdir(cfg: DictConfig, values: list, job: list[str], number: int, raw: str) -> str:
    """``hydra.sweep.subdir`` of job ``number``: its composed config with its values, and the
    job's number and override names Hydra gives it (``hydra.job.override_dirname`` is Hydra's
    join of the sorted overrides, without its excluded keys)."""
    cfg = OmegaConf.create(cfg)  # a copy: the composed config serves other jobs too
    naming = cfg.hydra.job.config.override_dirname
    lines = sorted(o for o in job if o.partition("=")[0] not in naming.exclude_keys)
    with open_dict(cfg):
        for override in values:
            OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
        cfg.hydra.job.num = cfg.hydra.job.id = number
        cfg.hydra.job.override_dirname = naming.item_sep.join(lines).replace("=", naming.kv_sep)
        cfg.hydra.overrides.task = list(job)
    try:
        return str(OmegaConf.select(cfg, "hydra.sweep.subdir"))
    except Exception as error:  # noqa: BLE001 - an interpolation that does not resolve
        first = str(error).strip().splitlines()[0]
        raise ConfigError(
            f"hydra.sweep.subdir={raw}: cannot be resolved for the job {' '.join(job)} ({first}); "
            f"allowed: interpolations of keys the config has, e.g. ${{seed}}"
        ) from None
