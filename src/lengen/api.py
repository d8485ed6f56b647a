"""A finished run, back in Python: ``lengen.load_run(run_dir)`` (docs/analysis.md, notebooks).

``rebuild_run`` is the one way a run directory's model comes back (its checkpoint checked
against config.yaml, the model built, its weights loaded): ``load_run`` and eval.py both use it.
"""

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
    train_steps: int | None = None  #: training steps the checkpoint holds (its global step)
    train_tokens: int = 0  #: tokens trained on, as the checkpoint recorded them

    @property
    def diagnostics(self) -> dict:
        """Why the run extrapolates as it does (docs/analysis.md): ``attention_diagnostics`` and
        ``accuracy_by_answer_position`` from results.json, ``accuracy_by_depth`` from its file
        (retrieval tasks); a section the run lacks is absent. As DataFrames:
        ``lengen.aggregate.diagnostics`` (``attention_frame``, ``position_frame``,
        ``depth_frame``)."""
        import json

        keys = ("attention_diagnostics", "accuracy_by_answer_position")
        sections = {key: self.results[key] for key in keys if key in (self.results or {})}
        if (depth := self.path / "accuracy_by_depth.json").is_file():
            sections["accuracy_by_depth"] = json.loads(depth.read_text())
        return sections


def load_run(run_dir: str | Path, overrides: list[str] | tuple = ()) -> Run:
    """Rebuild a run from ``run_dir``: its config.yaml (with ``key=value`` overrides, e.g.
    ``["eval.lengths=[64]"]``), the model from ``checkpoints/last.ckpt``, the data source and
    results.json. Raises ConfigError naming ``run`` when the directory is not a lengen run."""
    from lengen.preflight import validate
    from lengen.results import load_results
    from lengen.rundir import load_config

    path = Path(run_dir)
    cfg = load_config(path, list(overrides))
    validate(cfg)
    run = rebuild_run(path, cfg)
    results_path = path / "results.json"
    run.results = load_results(results_path) if results_path.is_file() else None
    return run


def rebuild_run(path: Path, cfg: DictConfig, weights_key: str = "run") -> Run:
    """The run in ``path`` as ``cfg`` (its config.yaml, overrides applied, validated) builds it:
    the checkpoint is read and refused if it was trained with another config than
    config.yaml, then data and model are built and the weights loaded (a mismatch is a
    ConfigError starting with ``weights_key``). ``results`` is left None: reading results.json
    is ``load_run``'s part."""
    from lengen.build import build
    from lengen.checkpoints import load_checkpoint, load_weights
    from lengen.checks import ConfigError
    from lengen.rundir import stored_config_refusal

    checkpoint = load_checkpoint(path, "run")
    refusal = stored_config_refusal(path, checkpoint)
    if refusal is not None:
        raise ConfigError(refusal)
    data, model, lengths = build(cfg)
    load_weights(model, checkpoint, weights_key)
    model.eval()
    return Run(
        path,
        cfg,
        model,
        data,
        lengths,
        results=None,
        train_steps=checkpoint.get("global_step"),
        train_tokens=checkpoint.get("lengen", {}).get("train_tokens", 0),
    )
