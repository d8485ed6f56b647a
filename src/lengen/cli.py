"""What the entry points do with errors: one line for bad input, and sweeps that go on.

A run that fails writes ``failed.json`` (the error, and for crashes the traceback) into its run
directory, unless that directory already holds finished results. In a ``-m`` sweep the failure
does not stop the other runs; ``SweepReport`` lists every failed run when the sweep ends and
makes the sweep's exit status non-zero.

Exit statuses: 2 bad input, 3 training diverged, 128 + the signal's number when a signal
stopped training with a checkpoint (143 for SIGTERM, 138 for SIGUSR1; a sweep stops too).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lengen.checkpoints import Preempted
from lengen.checks import TrainingDiverged
from lengen.config import ConfigError, processes

FAILED = "failed.json"


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Write failed.json into a run directory that holds no finished results."""
    from lengen.checkpoints import is_rank_zero
    from lengen.results import atomic_write_text

    if not is_rank_zero() or not run_dir.is_dir() or (run_dir / "results.json").exists():
        return  # rank 0 writes for all the processes of a multi-process run
    report = {
        "error": str(error).splitlines()[0] if str(error) else type(error).__name__,
        "type": type(error).__name__,
    }
    if not isinstance(error, ConfigError | TrainingDiverged | Preempted):
        report["traceback"] = traceback.format_exception(error)
    atomic_write_text(run_dir / FAILED, json.dumps(report, indent=2) + "\n")


def train_main(cfg: DictConfig) -> None:
    """The body of ``train.py``'s Hydra main."""
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
    try:
        run(cfg)
    except Preempted as error:  # a signal asked us to stop: stop the sweep too
        record_failure(Path(hydra.runtime.output_dir), error)
        print(str(error), file=sys.stderr)
        sys.exit(128 + error.signum)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, then reported
        record_failure(Path(hydra.runtime.output_dir), error)
        if isinstance(error, ConfigError | TrainingDiverged):  # the user's to fix: one line
            print(f"error: {error}", file=sys.stderr)
            if not sweeping:
                sys.exit(2 if isinstance(error, ConfigError) else 3)
        elif not sweeping:
            raise
        else:
            traceback.print_exc()


class SweepReport(Callback):
    """Hydra callback: at the end of a sweep, list the runs that failed (exit status 1)."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        failed = sorted(sweep_dir.glob(f"*/{FAILED}"))
        if not failed:
            return
        runs = len([p for p in sweep_dir.iterdir() if (p / "config.yaml").is_file()])
        lines = [f"{len(failed)} of {runs} runs failed (details in each run's {FAILED}):"]
        for path in failed:
            lines.append(f"  {path.parent.name}: {json.loads(path.read_text())['error']}")
        print("\n".join(lines), file=sys.stderr)
        sys.exit(1)


def already_finished(arguments: Sequence[str]) -> bool:
    """``resume=true hydra.run.dir=<a finished run>``: say so, so that nothing is touched
    (Hydra would rewrite the run's .hydra/ files and log before the run could refuse)."""
    values = dict(a.partition("=")[::2] for a in arguments if "=" in a and not a.startswith("-"))
    run_dir = values.get("hydra.run.dir", "").strip("'\"")
    if values.get("resume", "").lower() != "true" or not run_dir or "-m" in arguments:
        return False
    if not (Path(run_dir) / "results.json").is_file():
        return False
    print(f"resume=true: {run_dir} already finished (results.json); nothing to do")
    return True


def check_override_keys(arguments: Sequence[str], config_dir: Path | None = None) -> None:
    """Compose the config with the command line's overrides, as Hydra will, and turn a key that
    does not exist (or an override Hydra cannot parse) into one ConfigError naming the key.

    In a -m sweep each swept value is tried once (the others at their first value), so a key
    that exists for one group choice but not another is caught before any run starts.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from lengen.config import CONFIG_DIR

    flags = {"-m", "--multirun"}
    overrides = [a for a in arguments if not a.startswith("-") and "=" in a]
    if any(a.startswith("-") and a not in flags for a in arguments):
        return  # Hydra's own flags (--help, --cfg, …): let Hydra handle them
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
    with initialize_config_dir(str(config_dir or CONFIG_DIR), version_base="1.3"):
        for trial in trials:
            try:
                compose("train", overrides=trial)
            except Exception as error:  # noqa: BLE001 - reworded below
                raise _override_error(error, trial) from None


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
