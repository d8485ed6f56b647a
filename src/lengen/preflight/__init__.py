"""Can this command line run? Everything that asks — keys, values, components, devices, memory
— before anything is written.

Each check raises ``ConfigError`` whose message starts with the offending key and what is
allowed; the entry points print it on one line and exit with status 2, no traceback. A room
per job, in the order ``precheck`` asks:

* **the command line as Hydra reads it, and its keys** (``command``: ``parse_command_line``,
  its flags too, so ``--config-dir`` carries nothing past the checks; ``check_group_overrides``,
  ``check_override_keys``: every ``group=choice`` names a yaml, every override names a key that
  exists), and **the caches** it will write (``lengen.caches.cache_refusal``);
* **values** (``values.validate``): every generic key against its typed config
  (``lengen.options``), and the data source's own keys, without torch; once per config and
  process (its docstring: composed twice, validated once);
* **where the run writes and how its processes start** (``launch``: ``check_output_dir``, no
  file in the way, no name too long, a writable folder; ``check_launch``, nodes and ranks that
  something will start; a ``results.json`` that is no JSON object, ``check_results_file``) and
  **the run directory's rules** (``lengen.rundir``);
* **a sweep's combinations** (``sweeps``: jobs that would share a directory, and
  ``hydra.sweeper.skip_invalid``'s job-by-job checks);
* **devices, precision and memory** (``resources.check_resources``);
* **components** (``components.check_components``): the data source's, the encoding's per
  stack of the model, without torch for lengen's own; others are built on the meta device
  (``check_by_building``).

The few private Hydra names this needs are named in ``hydra_private``, with why. The names
below are the package's: callers import them from ``lengen.preflight``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lengen.caches import cache_refusal
from lengen.config import CONFIG_DIR
from lengen.errors import ConfigError
from lengen.preflight.command import (
    Command,
    check_group_overrides,
    check_new_top_level_keys,
    check_override_keys,
    check_sweep_values,
    group_choices,
    parse_command_line,
    parse_overrides,
)
from lengen.preflight.components import check_by_building, check_components
from lengen.preflight.hydra_private import composing
from lengen.preflight.launch import (
    _NEW_RUN_FOLDER,
    DEFAULT_RUNS_FOLDER,
    NODE_VARIABLES,
    _first_missing,
    _submitit,
    check_launch,
    check_output_dir,
    check_results_file,
    remove_refused_run,
)
from lengen.preflight.resources import (
    available_memory,
    check_devices,
    check_memory,
    check_resources,
    config_axes,
    cuda_available,
)
from lengen.preflight.sweeps import (
    SKIP_INVALID,
    check_job,
    check_shared_directories,
    check_sweep_jobs,
    check_sweep_subdirs,
    checked_jobs,
    job_refusal,
    skip_invalid,
    sweep_jobs,
)
from lengen.preflight.values import (
    REQUIRED_GROUPS,
    Checked,
    check_required_groups,
    checked,
    processes,
    unresolvable_key,
    validate,
)
from lengen.rundir import RunDirectory, is_rank_zero, sweep_holder, sweep_in_use_message

__all__ = [
    "NODE_VARIABLES",
    "REQUIRED_GROUPS",
    "SKIP_INVALID",
    "Checked",
    "Command",
    "available_memory",
    "check_by_building",
    "check_components",
    "check_devices",
    "check_group_overrides",
    "check_job",
    "check_launch",
    "check_memory",
    "check_new_top_level_keys",
    "check_output_dir",
    "check_override_keys",
    "check_required_groups",
    "check_resources",
    "check_results_file",
    "check_shared_directories",
    "check_sweep_jobs",
    "check_sweep_subdirs",
    "checked",
    "checked_jobs",
    "composing",
    "config_axes",
    "cuda_available",
    "group_choices",
    "job_refusal",
    "parse_command_line",
    "parse_overrides",
    "precheck",
    "processes",
    "remove_refused_run",
    "skip_invalid",
    "sweep_jobs",
    "unresolvable_key",
    "validate",
]


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
    check_sweep_values(command.overrides, command.sweeping)
    check_group_overrides(command.overrides, command.config_dirs)
    check_new_top_level_keys(command.overrides, command.config_dirs, command.config_name)
    values = {
        key.lstrip("+"): value.strip("'\" ")
        for key, _, value in (a.partition("=") for a in command.overrides if "=" in a)
    }
    launcher = values.get("hydra/launcher")
    from lengen.preflight.launchers import check_launcher_choice

    check_launcher_choice(launcher, command.sweeping)
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
    if sweeping:  # the launcher's, sweeper's and records folder's refusals (launchers.py),
        # after check_output_dir: a 300-byte folder name made their stat() raise
        from lengen.preflight.launchers import check_sweep_launch

        check_sweep_launch(
            command.overrides, command.config_dirs, command.config_name, values.get(where)
        )
    # a subdir of the user's: every job's folder resolved; lengen's default: from the trials
    if sweeping and not check_sweep_subdirs(command):
        check_shared_directories(configs)
    for cfg in configs:
        check_launch(cfg, sweeping, cluster)
    from lengen.preflight.packs import check_pack_sweep  # hydra.sweeper.pack (docs/scaling.md)

    check_pack_sweep(command, values.get("hydra.sweeper.pack"), skipping, cluster)
    if not sweeping:
        _NEW_RUN_FOLDER["path"] = _first_missing(run_dir) if run_dir is not None else "default"
        _NEW_RUN_FOLDER["parent"] = (
            _first_missing(str(DEFAULT_RUNS_FOLDER)) if run_dir is None else None
        )
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
    if sweeping and not skipping:  # last: a job's evaluation estimated (torch) once every
        # other check passed (skip_invalid: check_sweep_jobs asked it of every job)
        from lengen.preflight.evaluations import check_sweep_evaluations

        check_sweep_evaluations(configs)
    return None
