"""Logger factories; each writes inside the run directory, never the current directory.

The logger yamls point their ``_target_`` here; the run passes ``save_dir``.
"""

from __future__ import annotations

import os
from pathlib import Path

WANDB_MODES = ("offline", "online", "disabled")


def csv(save_dir: str):
    """Lightning's CSV logger: ``<run dir>/logs/metrics.csv``."""
    from pytorch_lightning.loggers import CSVLogger

    return CSVLogger(save_dir=save_dir, name="logs", version="")


def none(save_dir: str):
    """No logger."""
    return False


def wandb(
    save_dir: str,
    project: str = "lengen",
    group: str | None = None,
    run_name: str | None = None,
    mode: str | None = None,
):
    """Weights & Biases, offline unless ``mode`` (or ``WANDB_MODE``) says otherwise.

    Offline runs land in ``<run dir>/wandb/offline-run-*``; upload later with ``wandb sync``.
    Runs of one ``-m`` sweep share a group (the sweep folder's name) unless ``group`` is set.
    """
    mode = mode or os.environ.get("WANDB_MODE") or "offline"
    if mode not in WANDB_MODES:
        raise ValueError(f"logger.mode must be one of {', '.join(WANDB_MODES)}; got {mode!r}")
    for variable in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        os.environ.setdefault(variable, str(Path(save_dir) / ".wandb"))
    os.environ["WANDB_MODE"] = mode
    group = group or sweep_name()
    from pytorch_lightning.loggers import WandbLogger

    return WandbLogger(
        save_dir=save_dir,
        project=project,
        group=group,
        name=run_name,
        offline=mode == "offline",
        mode=mode,
    )


def sweep_name() -> str | None:
    """The folder name of the -m sweep this run belongs to, so wandb groups its runs."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return Path(HydraConfig.get().sweep.dir).name


def log_results(logger, rows: list[dict], plot_path: Path | None) -> None:
    """Send the per-length table and the plot to loggers that take tables (wandb).

    The CSV logger keeps training curves only; per-length numbers live in results.json.
    """
    if not logger or not hasattr(logger, "log_table"):
        return
    columns = list(rows[0]) if rows else []
    logger.log_table(
        key="eval/extrapolation", columns=columns, data=[[row[c] for c in columns] for row in rows]
    )
    if plot_path is not None and hasattr(logger, "log_image"):
        logger.log_image(key="eval/extrapolation_plot", images=[str(plot_path)])
