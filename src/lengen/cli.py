"""What the entry points do with errors: one line for bad input, and sweeps that go on.

Every refusal happens before Hydra writes anything (``precheck``): a refused command changes
nothing on disk. A run that fails later writes ``failed.json`` (the error, and for crashes the
traceback) into its run directory, unless that directory already holds finished results. In a
``-m`` sweep a failure does not stop the other runs; ``SweepReport`` counts what every job did
when the sweep ends and makes the sweep's exit status non-zero if any job was refused or failed.

Exit statuses: 2 bad input, 3 training diverged, 4 a checkpoint could not be written (the
previous one is kept), 128 + the signal's number when a signal stopped training with a
checkpoint (143 for SIGTERM, 138 for SIGUSR1; a sweep stops too).
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lengen.checks import (
    CheckpointWriteError,
    ConfigError,
    EvaluationOutOfMemory,
    Preempted,
    TrainingDiverged,
)
from lengen.config import processes
from lengen.rundir import RunDirectory

#: errors that are the user's to fix, printed as one line, and their exit statuses
EXIT_STATUS = {
    ConfigError: 2,
    TrainingDiverged: 3,
    CheckpointWriteError: 4,
    EvaluationOutOfMemory: 5,
}
ONE_LINE = tuple(EXIT_STATUS)


def train_main(cfg: DictConfig) -> str:
    """The body of ``train.py``'s Hydra main -> the job's outcome (a sweep's report counts
    them): ``trained``, ``finished earlier``, ``refused: …`` or ``failed: …``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from lengen.train import run

    hydra = HydraConfig.get()
    sweeping = hydra.mode == RunMode.MULTIRUN
    if (
        sweeping
        and hydra.launcher._target_.endswith("BasicLauncher")
        and processes(cfg.trainer) != 1
    ):
        # Lightning starts the other ranks by re-running the command line: the whole sweep
        print(
            f"error: trainer.devices={cfg.trainer.devices} (several processes per run) cannot "
            f"run inside a local -m sweep; allowed: trainer.devices=1 in local sweeps, or "
            f"hydra/launcher=slurm, which starts each run's processes itself (docs/scaling.md)",
            file=sys.stderr,
        )
        sys.exit(2)
    directory = RunDirectory(hydra.runtime.output_dir)
    done_before = directory.results.is_file()
    try:
        run(cfg)
        return "finished earlier" if done_before else "trained"
    except Preempted as error:  # a signal asked us to stop: stop the sweep too
        directory.record_failure(error)
        print(str(error), file=sys.stderr)
        sys.exit(128 + error.signum)
    except KeyboardInterrupt as error:  # Ctrl-C outside training: recorded, not lost
        directory.record_failure(error)
        print("interrupted by SIGINT (Ctrl-C) outside training; nothing saved", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, then reported
        if not isinstance(error, ConfigError):  # a refusal leaves the directory as it was
            directory.record_failure(error)
        if isinstance(error, ONE_LINE):  # the user's to fix: one line, no traceback
            print(f"error: {error}", file=sys.stderr)
            if not sweeping:
                sys.exit(EXIT_STATUS[type(error)])
            return f"{'refused' if isinstance(error, ConfigError) else 'failed'}: {error}"
        if not sweeping:
            raise
        traceback.print_exc()
        return f"failed: {type(error).__name__}: {error}"
    finally:
        RunDirectory.release_all()


class SweepReport(Callback):
    """Hydra callback: at the end of a sweep, count what its jobs did, say where the runs are
    and what to run next, and list the jobs that were refused or failed (exit status 1)."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, str]] = []  # (run directory name, outcome)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        from hydra.core.utils import JobStatus

        name = Path(config.hydra.runtime.output_dir).name
        if job_return.status == JobStatus.COMPLETED:
            self.outcomes.append((name, str(job_return.return_value)))
        else:  # an exception escaped the job (sys.exit from a preempted run, say)
            self.outcomes.append((name, f"failed: {job_return._return_value!r}"))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        kinds = [outcome.partition(":")[0] for _, outcome in self.outcomes]
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
        print(
            f"\nsweep: {len(self.outcomes)} runs ({counts or 'none'}) in {sweep_dir}\n"
            f"next: python scripts/aggregate.py {sweep_dir} && python scripts/plot.py {sweep_dir}"
        )
        bad = [(n, o) for n, o in self.outcomes if o.startswith(("refused", "failed"))]
        if not bad:
            return
        lines = [f"{len(bad)} of {len(self.outcomes)} runs refused or failed:"]
        lines += [f"  {name}: {outcome.splitlines()[0]}" for name, outcome in bad]
        print("\n".join(lines), file=sys.stderr)
        sys.exit(1)


def precheck(arguments: Sequence[str]) -> int | None:
    """Everything a command line can be refused for, before Hydra writes anything (it creates
    the run directory and its log first): unknown groups and keys, every value (``validate``),
    every component's own checks (``check_components``: without torch for lengen's own; others
    built, the model on the meta device), and the run directory's rules. -> an exit status to stop with now (0: the run is already done), or
    None to go on. Raises ConfigError (one line naming the key)."""
    from hydra.utils import get_class

    from lengen.build import check_by_building, check_components, check_resources
    from lengen.config import check_group_overrides, validate
    from lengen.rundir import RunDirectory, is_rank_zero

    check_group_overrides(arguments)
    configs = check_override_keys(arguments)
    values = dict(a.partition("=")[::2] for a in arguments if "=" in a and not a.startswith("-"))
    run_dir = values.get("hydra.run.dir")
    if run_dir is not None and not run_dir.strip("'\" "):
        raise ConfigError("hydra.run.dir: empty; allowed: a directory path (or leave it unset)")
    for cfg in configs:
        validate(cfg)
    sweeping = bool({"-m", "--multirun"} & set(arguments))
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


def check_override_keys(arguments: Sequence[str], config_dir: Path | None = None) -> list:
    """Compose the config with the command line's overrides, as Hydra will, and turn a key that
    does not exist (or an override Hydra cannot parse) into one ConfigError naming the key.
    -> the composed configs (without ``hydra``), one per trial below.

    In a -m sweep each swept value is tried once (the others at their first value), so a key
    that exists for one group choice but not another is caught before any run starts.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from lengen.config import CONFIG_DIR

    flags = {"-m", "--multirun"}
    overrides = [a for a in arguments if not a.startswith("-") and "=" in a]
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
    import re

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
    from omegaconf import DictConfig, OmegaConf

    try:
        cfg = compose("train", overrides=trial)
    except Exception:  # noqa: BLE001 - another bad override: no list, the key is still named
        return []
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return sorted(str(k) for k in node) if isinstance(node, DictConfig) else []
