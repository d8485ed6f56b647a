"""What the entry points do with errors: one line for bad input, and sweeps that go on.

A run that fails writes ``failed.json`` (the error, and for crashes the traceback) into its run
directory, unless that directory already holds finished results. In a ``-m`` sweep the failure
does not stop the other runs; ``SweepReport`` lists every failed run when the sweep ends and
makes the sweep's exit status non-zero.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lengen.checks import TrainingDiverged
from lengen.config import ConfigError

FAILED = "failed.json"


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Write failed.json into a run directory that holds no finished results."""
    from lengen.results import atomic_write_text

    if not run_dir.is_dir() or (run_dir / "results.json").exists():
        return
    report = {
        "error": str(error).splitlines()[0] if str(error) else type(error).__name__,
        "type": type(error).__name__,
    }
    if not isinstance(error, ConfigError | TrainingDiverged):
        report["traceback"] = traceback.format_exception(error)
    atomic_write_text(run_dir / FAILED, json.dumps(report, indent=2) + "\n")


def train_main(cfg: DictConfig) -> None:
    """The body of ``train.py``'s Hydra main."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from lengen.train import run

    hydra = HydraConfig.get()
    sweeping = hydra.mode == RunMode.MULTIRUN
    try:
        run(cfg)
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
