"""A sweep's runs and its time, without running it: the line lengen's sweeper prints before its
first run (``sweep: 9 runs, ≈ 1h10m in all, 2 at a time (…)``), for a recipe's dry run.

python scripts/sweep_plan.py [--each] <the arguments of train.py -m …> [-- <another's> …]

The arguments are a ``train.py -m`` command's (``-m`` itself may be given or not); a recipe of
several multiruns gives each one's after a ``--``, and the line is their total. Every job is
composed as the sweeper composes it and estimated by the same functions
(``lengen.sweep_estimate.planned_runs``, ``total_line``) from this machine's calibration; the
runs at once come from ``hydra/launcher`` as the sweeper counts them. Nothing is written and no
model is trained (each is built on the meta device). ``--each`` adds one line per job: its
estimate and the overrides that vary between the jobs. Unlike the sweeper, it estimates jobs
for a SLURM launcher too (from this machine's calibration, which does not describe the
cluster's), and it neither packs seeds (``hydra.sweeper.pack``) nor skips invalid jobs. What the estimate does not count is
the calibration's (docs/models.md "Looped depth": a looped stack's blocks are counted once).

Exit 0 done; 2 an argument that Hydra cannot parse or a config that cannot be composed (one
line, naming it).
"""

from __future__ import annotations

import sys


def jobs_of(arguments: list[str]) -> list[list[str]]:
    """Every job's overrides, in the order the basic sweeper runs them (a,b,c sweeps expanded),
    multirun after multirun (``--`` between them)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    groups, jobs = [[]], []
    for argument in arguments:
        if argument == "--":
            groups.append([])
        else:
            groups[-1].append(argument)
    for group in filter(None, groups):
        parsed = OverridesParser.create().parse_overrides(group)
        jobs += [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    return jobs


def varying(jobs: list[list[str]]) -> list[str]:
    """The override keys whose values differ between the jobs, in the first job's order."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for override in job:
            key, _, value = override.partition("=")
            values.setdefault(key, set()).add(value)
    return [key for key, seen in values.items() if len(seen) > 1]


def main(arguments: list[str]) -> int:
    each = "--each" in arguments
    arguments = [a for a in arguments if a not in ("--each", "-m", "--multirun")]
    if not [a for a in arguments if a != "--"]:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from hydra_plugins.lengen_sweeper import parallel_runs
    from lengen.caches import use_lengen_caches
    from lengen.config import CONFIG_DIR
    from lengen.estimate import duration
    from lengen.sweep_estimate import planned_runs, total_line

    use_lengen_caches()  # the calibration file a run would read (docs/scaling.md)
    try:
        jobs = jobs_of(arguments)
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            configs = [
                compose(config_name="train", overrides=job, return_hydra_config=True)
                for job in jobs
            ]
    except (HydraException, OmegaConfBaseException, ValueError) as error:
        print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    workers = parallel_runs(configs[0].hydra.launcher, len(configs))
    estimates = planned_runs(configs, [1] * len(configs))
    if each:
        shown = varying(jobs)
        for job, estimate in zip(jobs, estimates, strict=True):
            time = "no estimate" if estimate is None else f"≈ {duration(estimate['seconds'])}"
            label = " ".join(o for o in job if o.partition("=")[0] in shown) or " ".join(job)
            print(f"  {time:>12}  {label}")
    total = total_line(estimates, workers)
    print(total or f"sweep: {len(jobs)} runs, no estimate (none could be made here)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
