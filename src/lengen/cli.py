"""What the entry points do with errors: one line for bad input, and sweeps that go on.

Every refusal happens before Hydra writes anything (``lengen.preflight.precheck``, which
train.py calls first): a refused command changes nothing on disk. A run that fails later writes
``failed.json`` (the error, and for crashes the traceback) into its run directory, unless that
directory already holds finished results. In a ``-m`` sweep a failure does not stop the other
runs; ``SweepReport`` counts what every job did when the sweep ends and makes the sweep's exit
status non-zero if any job was refused or failed.

Exit statuses: 2 bad input, 3 training diverged, 4 a checkpoint could not be written (the
previous one is kept), 128 + the signal's number when a signal stopped training with a
checkpoint (143 for SIGTERM, 138 for SIGUSR1; a sweep stops too).
"""

from __future__ import annotations

import signal
import sys
import traceback
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
from lengen.preflight import processes
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
