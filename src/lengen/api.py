"""A finished run, back in Python: ``lengen.load_run(run_dir)`` (docs/analysis.md, notebooks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig


@dataclass
class Run:
    """A run directory's config, model (weights loaded, eval mode, CPU), data and results."""

    path: Path
    config: DictConfig
    model: object  #: the rebuilt model (``torch.nn.Module``) with the checkpoint's weights
    data: object  #: the data source (``lengen.data.source.DataSource``): batches at any length
    lengths: list[int]  #: the evaluation lengths of the config
    results: dict | None  #: results.json, or None when the run never finished


def load_run(run_dir: str | Path, overrides: list[str] | tuple = ()) -> Run:
    """Rebuild a run from ``run_dir``: its config.yaml (with ``key=value`` overrides, e.g.
    ``["eval.lengths=[64]"]``), the model from ``checkpoints/last.ckpt``, the data source and
    results.json. Raises ConfigError naming ``run`` when the directory is not a lengen run."""
    from lengen.build import build
    from lengen.checkpoints import load_checkpoint, load_weights
    from lengen.checks import ConfigError
    from lengen.config import validate
    from lengen.results import load_results
    from lengen.rundir import load_config, stored_config_refusal

    path = Path(run_dir)
    cfg = load_config(path, list(overrides))
    validate(cfg)
    data, model, lengths = build(cfg)
    checkpoint = load_checkpoint(path, "run")
    refusal = stored_config_refusal(path, checkpoint)
    if refusal is not None:
        raise ConfigError(refusal)
    load_weights(model, checkpoint, "run")
    model.eval()
    results_path = path / "results.json"
    results = load_results(results_path) if results_path.is_file() else None
    return Run(path, cfg, model, data, lengths, results)
