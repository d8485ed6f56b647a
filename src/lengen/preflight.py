"""Can this command line run? Everything that asks — keys, values, components, devices, memory
— before anything is written.

Each check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. In the
order ``precheck`` asks:

* **the command line as Hydra reads it** (``parse_command_line``: its flags too, so
  ``--config-dir`` carries nothing past the checks) and **the caches** it will write
  (``lengen.caches.cache_refusal``);
* **keys** (``check_group_overrides``, ``check_override_keys``): every ``group=choice`` names a
  yaml, every override names a key that exists;
* **values** (``validate``): every generic key against its typed config (``lengen.options``),
  and the data source's own keys, without torch;
* **where the run writes** (``check_output_dir``: no file in the way, no name too long, a
  writable folder) and **how its processes start** (``check_launch``: nodes and ranks that
  something will start);
* **the run directory's rules** (``lengen.rundir``; a ``results.json`` that is no JSON object,
  ``check_results_file``);
* **devices, precision and memory** (``check_resources``);
* **components** (``check_components``): the data source's, the encoding's per stack of the
  model, without torch for lengen's own; others are built on the meta device
  (``check_by_building``).

**A sweep's combinations.** A -m sweep is checked with each swept value tried once (the others
at their first value), and one refusal refuses the whole command. With
``hydra.sweeper.skip_invalid=true`` on the command line, ``check_sweep_jobs`` instead composes
every job as Hydra's basic sweeper lists them and asks each the checks of a single run
(``check_job``): a refused job is recorded with its one-line reason, and lengen's sweeper
(``hydra_plugins.lengen_sweeper``) leaves it out of the sweep (``job_refusal``); keys that do not
exist, and a sweep with no job left, still refuse the whole command.

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

import contextlib
import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lengen.build import build, build_data, user_errors
from lengen.caches import cache_refusal, unwritable_reason
from lengen.checks import ConfigError, check_batch_split, positive_int
from lengen.config import CONFIG_DIR, GROUPS, ROOT, eval_lengths
from lengen.options import (
    DataSeedOptions,
    EvalOptions,
    ModelOptions,
    OptimOptions,
    RunOptions,
    TrainerOptions,
    logger_options,
    model_options,
)
from lengen.rundir import (
    LOCK,
    RunDirectory,
    is_rank_zero,
    resolved_config,
    sweep_holder,
    sweep_in_use_message,
)
from lengen.schema import Options, node_options


# -- the command line: everything, before Hydra writes anything --------------------------------
@dataclasses.dataclass(frozen=True)
class Command:
    """A ``train.py`` command line as Hydra reads it (``parse_command_line``)."""

    overrides: list[str]
    sweeping: bool
    #: the config root, and ``--config-dir``'s folder before it (Hydra searches it first)
    config_dirs: tuple[Path, ...] = (CONFIG_DIR,)
    config_name: str = "train"


def parse_command_line(arguments: Sequence[str]) -> Command | None:
    """Read the command line with Hydra's own parser, so its flags (``--config-dir``,
    ``--config-name``, …) cannot carry a command past the checks. -> None for the flags that
    only print (``--help``, ``--cfg``, ``--info``, …): Hydra answers them, running nothing."""
    from hydra._internal.utils import get_args_parser

    parsed = get_args_parser().parse_args(list(arguments))  # a bad flag: argparse's usage, exit 2
    if (
        parsed.help
        or parsed.hydra_help
        or parsed.cfg
        or parsed.info
        or parsed.shell_completion
        or parsed.experimental_rerun
    ):
        return None
    primary = CONFIG_DIR
    if parsed.config_path is not None:  # relative to train.py's folder, as @hydra.main reads it
        primary = (ROOT / parsed.config_path).resolve()
    dirs = (primary,)
    if parsed.config_dir is not None:
        extra = Path(parsed.config_dir).expanduser().absolute()
        if not extra.is_dir():
            raise ConfigError(f"--config-dir={parsed.config_dir}: no such directory")
        dirs = (extra, primary)
    for folder in dirs:
        if not folder.is_dir():
            raise ConfigError(f"--config-path: {folder} is no directory")
    return Command(
        overrides=list(parsed.overrides),
        sweeping=bool(parsed.multirun),
        config_dirs=dirs,
        config_name=parsed.config_name or "train",
    )


def precheck(arguments: Sequence[str]) -> int | None:
    """Everything a command line can be refused for, before Hydra writes anything (it creates
    the run directory and its log first): unknown groups and keys, every value (``validate``),
    every component's own checks (``check_components``: without torch for lengen's own; others
    built, the model on the meta device), where the run writes (``check_output_dir``), how
    its processes start (``check_launch``), and the run directory's rules. -> an exit status to
    stop with now (0: the run is already done), or None to go on. Raises ConfigError (one line
    naming the key)."""
    from hydra.utils import get_class

    command = parse_command_line(arguments)
    if command is None:
        return None
    if (refusal := cache_refusal()) is not None:
        raise ConfigError(refusal)
    check_group_overrides(command.overrides, command.config_dirs)
    check_new_top_level_keys(command.overrides, command.config_dirs, command.config_name)
    values = {
        key.lstrip("+"): value.strip("'\" ")
        for key, _, value in (a.partition("=") for a in command.overrides if "=" in a)
    }
    launcher = values.get("hydra/launcher")
    cluster = launcher is not None and _submitit(launcher, command.config_dirs)
    skipping = command.sweeping and skip_invalid(values.get(SKIP_INVALID))
    if skipping:  # every job composed and checked; the refused ones left to the sweeper to skip
        configs = check_sweep_jobs(command, cluster)
    else:
        configs = check_override_keys(
            [*command.overrides, *(["-m"] if command.sweeping else [])],
            command.config_dirs,
            command.config_name,
        )
    run_dir = values.get("hydra.run.dir")
    if run_dir is not None and not run_dir:
        raise ConfigError("hydra.run.dir: empty; allowed: a directory path (or leave it unset)")
    for cfg in configs:
        validate(cfg)
    sweeping = command.sweeping
    where = "hydra.sweep.dir" if sweeping else "hydra.run.dir"
    if values.get(where):
        check_output_dir(where, values[where])
        if sweeping and (pid := sweep_holder(Path(values[where]))) is not None:
            raise ConfigError(sweep_in_use_message(Path(values[where]), pid))
    elif command.config_dirs == (CONFIG_DIR,):  # the default: under results/ of this folder
        check_output_dir(f"{where} (default)", "results/multiruns" if sweeping else "results/runs")
    own_subdir = "hydra.sweep.subdir" in values or any(
        a.lstrip("~").startswith("hydra.sweep.subdir") for a in command.overrides
    )
    if sweeping and not own_subdir:
        check_shared_directories(configs)
    for cfg in configs:
        check_launch(cfg, sweeping, cluster)
    from lengen.sweep_packs import check_pack_sweep  # hydra.sweeper.pack (docs/scaling.md)

    check_pack_sweep(command, values.get("hydra.sweeper.pack"), skipping, cluster)
    if not sweeping:
        _NEW_RUN_FOLDER["path"] = _first_missing(run_dir) if run_dir is not None else "default"
    # the other ranks of a multi-process run re-run this command into rank 0's directory
    if configs and run_dir is not None and not sweeping and is_rank_zero():
        directory = RunDirectory(run_dir)
        check_results_file(directory.results)
        if directory.finished(configs[0]) is not None:  # resume on a finished run: done
            return 0
        directory.check_start(configs[0])
    for cfg in configs if not skipping else ():  # (check_sweep_jobs asked these)
        check_resources(cfg)
        # a component of the user's: its constructor checks it (text reads its corpus at run
        # time, so the build checks it then)
        if not check_components(cfg) and get_class(cfg.data._target_).cheap_to_build:
            check_by_building(cfg)
    return None


# -- a sweep that skips the combinations that cannot run ---------------------------------------
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
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = parse_overrides(overrides)
    task = [o for o in parsed if not o.is_hydra_override()]
    return [job for batch in BasicSweeper.split_arguments(task, None) for job in batch]


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
    """The checks ``precheck`` asks of each config, for one job of a sweep (ConfigError)."""
    from hydra.utils import get_class

    validate(cfg)
    check_launch(cfg, True, cluster)
    check_resources(cfg)
    if not check_components(cfg) and get_class(cfg.data._target_).cheap_to_build:
        check_by_building(cfg)


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


# -- a refusal after Hydra wrote: undone ------------------------------------------------------------
#: the top folder a single run's directory creates (nothing was there when precheck looked),
#: or "default" (the default directory, new by its nonce); None: it existed
_NEW_RUN_FOLDER: dict[str, Path | str | None] = {"path": None}


def _first_missing(path: str) -> Path | None:
    target = Path(path).expanduser().absolute()
    if target.exists():
        return None
    while not target.parent.exists() and target.parent != target:
        target = target.parent
    return target


def remove_refused_run(output_dir: str | Path) -> None:
    """A refusal that only the built run can make (a text corpus shorter than an evaluation
    length, a checkpoint whose shapes differ) comes after Hydra created the run directory and
    its log: remove what this command created, so a refused command leaves nothing, as one
    refused by precheck does. Only a folder precheck saw missing is removed, and only while no
    other process holds its run lock."""
    import shutil

    output_dir = Path(output_dir).absolute()
    new = _NEW_RUN_FOLDER["path"]
    top = output_dir if new == "default" else new
    if not isinstance(top, Path) or not top.is_dir() or not output_dir.is_relative_to(top):
        return
    RunDirectory.release_all()
    if RunDirectory(output_dir).in_use():  # another process started there meanwhile
        return
    shutil.rmtree(top, ignore_errors=True)


# -- where the run writes, and how its processes start -------------------------------------------
def check_output_dir(key: str, path: str) -> None:
    """A directory the run can make or write (``unwritable_reason``), asked before Hydra makes
    it, which would fail with a traceback; not inside the config root (a run's config.yaml
    there would be read as a config) nor inside another run's directory (aggregation would
    see one run in the other). An existing directory's own rules are ``lengen.rundir``'s."""
    reason = unwritable_reason(path)
    if reason is not None:
        separator = " " if reason.startswith("is ") else ": "
        raise ConfigError(
            f"{key}={path}{separator}{reason}; allowed: a directory path in a writable folder"
        )
    target = Path(path).expanduser().resolve()
    for configs in {CONFIG_DIR.resolve(), (ROOT / "configs").resolve()}:
        if target == configs or configs in target.parents:
            raise ConfigError(
                f"{key}={path} is inside the config folder {configs}; allowed: a directory "
                "outside it (results/ by default)"
            )
    # a run's own directory may be given again (resume); a sweep's jobs would land inside it
    folders = [*([] if key.startswith("hydra.run.dir") else [target]), *target.parents]
    for folder in folders:
        if (folder / LOCK).is_file() and (folder / "config.yaml").is_file():  # a run's
            relation = "is" if folder == target else "is inside"
            raise ConfigError(
                f"{key}={path} {relation} the run directory {folder}; allowed: a directory "
                "outside any run's (a sibling of it, say)"
            )


def check_results_file(results: Path) -> None:
    """A ``results.json`` that is not a readable JSON object (a directory, a truncated write
    by a tool of the user's) is neither a finished run nor an unfinished one: say so."""
    if not results.exists() and not results.is_symlink():
        return
    problem = None
    if not results.is_file():
        problem = "is not a file"
    else:
        try:
            if not isinstance(json.loads(results.read_text()), dict):
                problem = "holds no JSON object"
        except (OSError, UnicodeDecodeError, ValueError) as error:
            problem = f"cannot be read ({type(error).__name__})"
    if problem is not None:
        raise ConfigError(
            f"hydra.run.dir: {results} {problem}, so the run is neither finished nor "
            f"resumable; allowed: another hydra.run.dir, or move that file away yourself"
        )


#: the variables a cluster launcher or torchrun sets for the nodes of a multi-node run
NODE_VARIABLES = ("SLURM_NTASKS", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "GROUP_RANK")


def check_launch(cfg: DictConfig, sweeping: bool, cluster: bool) -> None:
    """Runs of several processes start only where something starts them: Lightning starts a
    node's other ranks by re-running the command line (in a local -m sweep: the whole sweep),
    and waits, ignoring signals, for nodes nobody starts. ``cluster``: a launcher that starts
    each run's processes itself (submitit's)."""
    import os

    nodes = cfg.trainer.get("num_nodes", 1)
    started = cluster or any(os.environ.get(v) for v in NODE_VARIABLES)
    if isinstance(nodes, int) and nodes > 1 and not started:
        raise ConfigError(
            f"trainer.num_nodes={nodes}: nothing here starts the other nodes (no SLURM job, "
            f"no torchrun); allowed: trainer.num_nodes=1 here, or a job on several nodes "
            f"(srun, or -m hydra/launcher=slurm; docs/scaling.md)"
        )
    if sweeping and not cluster and processes(cfg.trainer) != 1:
        raise ConfigError(
            f"trainer.devices={cfg.trainer.devices} (several processes per run) cannot run "
            f"inside a local -m sweep; allowed: trainer.devices=1 in local sweeps, or "
            f"hydra/launcher=slurm, which starts each run's processes itself (docs/scaling.md)"
        )


def _submitit(choice: str, config_dirs: Sequence[Path]) -> bool:
    """Whether ``hydra/launcher=<choice>`` is submitit's (ours, configs/hydra/launcher/slurm.yaml,
    extends it), which starts each run's processes on the cluster."""
    if "submitit" in choice:
        return True
    for folder in config_dirs:
        path = folder / "hydra" / "launcher" / f"{choice}.yaml"
        if path.is_file():
            return "submitit" in path.read_text()
    return False


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


def check_group_overrides(
    arguments: Sequence[str], config_dirs: Path | Sequence[Path] = CONFIG_DIR
) -> None:
    """Reject ``group=choice`` command-line overrides naming no yaml (sweeps: each of a,b,c)."""
    folders = [config_dirs] if isinstance(config_dirs, Path) else list(config_dirs)
    for argument in arguments:
        key, sep, value = argument.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or value in ("", "null"):
            continue
        allowed = sorted({c for folder in folders for c in group_choices(key, folder)})
        if value.strip().startswith("["):  # pe=[rope,alibi]: a list where one choice belongs
            raise ConfigError(
                f"{key}={value}: a group takes one choice; allowed: one of {', '.join(allowed)}, "
                f"or a sweep over several: -m {key}={value.strip().strip('[]')}"
            )
        for choice in value.split(","):
            if choice.strip() not in allowed:
                raise ConfigError(
                    f"{key}={choice.strip()}: unknown choice; allowed: {', '.join(allowed)}"
                )


def check_new_top_level_keys(
    arguments: Sequence[str], config_dirs: Sequence[Path], config_name: str = "train"
) -> None:
    """Refuse ``+foo=1``: a new top-level key no part of lengen reads would only change the
    run's id and sit in config.yaml as if it did something. Keys under a group (``+pe.x``) are
    their typed config's to refuse."""
    new = [a.partition("=")[0] for a in arguments if a.startswith("+") and "=" in a]
    new = [key for key in new if not any(c in key for c in "./")]
    new = [key for key in new if key.lstrip("+") not in (*GROUPS, "hydra", "")]
    if not new:
        return
    known = set(GROUPS)
    for folder in config_dirs:
        if (folder / f"{config_name}.yaml").is_file():
            known |= set(OmegaConf.load(folder / f"{config_name}.yaml")) - {"defaults"}
    for key in new:
        if key.lstrip("+") not in known:
            raise ConfigError(
                f"{key}: a new top-level key that nothing reads; allowed at the top level: "
                f"{', '.join(sorted(known))}"
            )


@contextlib.contextmanager
def composing(config_dirs: Sequence[Path]):
    """Hydra's ``initialize_config_dir`` over several folders, searched in order (train.py's
    ``--config-dir`` folder is searched before the config root, as Hydra does)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.initialize import get_gh_backup, restore_gh_from_backup
    from hydra.version import setbase

    backup = get_gh_backup()
    setbase("1.3")
    search_path = create_config_search_path(str(config_dirs[-1]))
    for folder in reversed(config_dirs[:-1]):
        search_path.prepend(provider="command-line", path=f"file://{folder}")
    Hydra.create_main_hydra2(task_name="app", config_search_path=search_path)
    try:
        yield
    finally:
        restore_gh_from_backup(backup)


def parse_overrides(overrides: Sequence[str]) -> list:
    """Hydra's parse of command-line overrides; a parse error is bad input (ConfigError)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except Exception as error:  # noqa: BLE001 - Hydra's parse errors are bad input
        first = str(error).strip().splitlines()[0]
        raise ConfigError(
            f"cannot parse the command line: {first}; allowed: key=value, with a value holding "
            "spaces or special characters quoted for Hydra inside the shell's quotes, e.g. "
            """'hydra.run.dir="/my runs/a"'"""
        ) from None


def check_override_keys(
    arguments: Sequence[str],
    config_dirs: Path | Sequence[Path] | None = None,
    config_name: str = "train",
) -> list:
    """Compose the config with the command line's overrides, as Hydra will, and turn a key that
    does not exist (or an override Hydra cannot parse) into one ConfigError naming the key.
    -> the composed configs (without ``hydra``), one per trial below.

    In a -m sweep each swept value is tried once (the others at their first value), so a key
    that exists for one group choice but not another is caught before any run starts.
    """
    from hydra import compose

    flags = {"-m", "--multirun"}
    # a deletion (~key) needs no value: it must reach the composition all the same
    overrides = [a for a in arguments if not a.startswith("-") and ("=" in a or a[:1] == "~")]
    if any(a.startswith("-") and a not in flags for a in arguments):
        return []  # Hydra's own flags: parse_command_line reads them
    parsed = parse_overrides(overrides)
    trials = [[_first_value(o) for o in parsed]]
    for index, override in enumerate(parsed):
        if override.is_sweep_override() and not override.key_or_group.startswith("hydra"):
            for value in list(override.sweep_string_iterator())[1:]:
                trial = list(trials[0])
                trial[index] = f"{override.get_key_element()}={value}"
                trials.append(trial)
    folders = config_dirs or CONFIG_DIR
    folders = [folders] if isinstance(folders, Path) else list(folders)
    configs = []
    with composing(folders):
        for trial in trials:
            try:
                configs.append(compose(config_name, overrides=trial))
            except Exception as error:  # noqa: BLE001 - reworded below
                raise _override_error(error, trial, config_name) from None
    return configs


def _first_value(override) -> str:
    if not override.is_sweep_override():
        return override.input_line
    first = next(iter(override.sweep_string_iterator()))
    return f"{override.get_key_element()}={first}"


def _override_error(error: Exception, trial: list[str], config_name: str) -> ConfigError:
    text = str(error)
    match = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", text)
    if match is None:
        match = re.search(r"Key '([^']+)' is not in struct", text)
    if match is None:
        if (present := re.search(r"An item is already at '([^']+)'", text)) is not None:
            key = present.group(1)
            return ConfigError(f"+{key}: {key} is a key already; allowed: {key}=… (without +)")
        return ConfigError(text.strip().splitlines()[0])
    key = match.group(1)
    parent, _, leaf = key.rpartition(".")
    rest = [t for t in trial if not t.lstrip("+").startswith(f"{key}=")]
    allowed = _keys_under(parent, rest, config_name)
    where = f"under {parent}" if parent else "at the top level"
    return ConfigError(
        f"{key}: no such key; allowed {where}: {', '.join(allowed) or 'none'} "
        f"(a new key needs +{key}=…)"
    )


def _keys_under(parent: str, trial: list[str], config_name: str) -> list[str]:
    from hydra import compose

    try:
        cfg = compose(config_name, overrides=trial)
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
    source's, then the encoding's for each stack of the model (``lengen.pe.config``; the
    model's own keys are ``validate``'s, ``lengen.options``) without importing torch, so a
    refusal takes well under 2 s; then drawing a few training instances (``check_sampling``,
    which imports torch). A source that is not cheap to build (text reads its corpus) is not
    built: its keys are checked by ``validate`` and the encoding learns its positions from
    ``planned_positions``. Raises ConfigError naming the key. -> True when this covered the
    config; False when a component is not lengen's (a user's encoding or model, which its
    constructor checks) or the kernel option is ``flex`` (its policy reads the built encoding
    and the device): ``check_by_building`` then runs their checks."""
    from hydra.utils import get_class

    from lengen.pe.config import check_encoding

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
    """A GPU asked for where there is none, or half precision on a CPU (slow, and not what
    any result here was measured with): say so now, not in Lightning's words later."""
    accelerator = str(cfg.trainer.accelerator)
    precision = str(cfg.trainer.get("precision", "32-true"))
    cpu = accelerator == "cpu" or (accelerator == "auto" and not cuda_available())
    if cpu and not precision.startswith(("32", "64")):
        raise ConfigError(
            f"trainer.precision={precision}: half precision needs a GPU, and this run trains "
            f"on the CPU; allowed: 32-true (or 64-true) on the CPU"
        )
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
