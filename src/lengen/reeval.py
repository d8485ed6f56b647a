"""Re-evaluate a finished run: ``python eval.py run=<run dir> [tag=…] [key=value …]``.

The run's ``config.yaml`` is loaded, the overrides applied to it (keys must already exist), the
model rebuilt and loaded from ``checkpoints/last.ckpt``, and ``results.<tag>.json`` (plus its
plot) written beside the original, which is never touched.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lengen.checkpoints import load_checkpoint, load_weights
from lengen.config import ConfigError, validate


def parse_arguments(arguments: Sequence[str]) -> tuple[Path, str | None, list[str]]:
    run_dir, tag, overrides = None, None, []
    for argument in arguments:
        key, sep, value = argument.partition("=")
        if not sep:
            raise ConfigError(
                f"{argument}: expected key=value; allowed: run=<dir>, tag=<name>, "
                f"and config overrides such as eval.lengths=[32,64]"
            )
        if key == "run":
            run_dir = Path(value)
        elif key == "tag":
            tag = value
        else:
            overrides.append(argument)
    if run_dir is None:
        raise ConfigError(
            "run: missing; allowed: run=<run dir> holding config.yaml and checkpoints/last.ckpt"
        )
    return run_dir, tag, overrides


def load_config(run_dir: Path, overrides: list[str]):
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"run={run_dir}: no config.yaml there; allowed: a lengen run directory")
    cfg = OmegaConf.load(config_path)
    OmegaConf.set_struct(cfg, True)
    for override in overrides:
        key = override.partition("=")[0]
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([override]))
        except OmegaConfBaseException as error:
            first = str(error).splitlines()[0]
            raise ConfigError(
                f"{key}: cannot apply {override!r} to this run's config ({first})"
            ) from None
    return cfg


def output_paths(run_dir: Path, tag: str | None) -> tuple[str, Path, Path]:
    """results.<tag>.json and extrapolation.<tag>.png, never an existing name."""
    base = tag or "eval-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if not base.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"tag={base!r}: allowed: letters, digits, '-', '_' and '.'")
    candidate, counter = base, 1
    while (run_dir / f"results.{candidate}.json").exists():
        candidate, counter = f"{base}-{counter}", counter + 1
    return (
        candidate,
        run_dir / f"results.{candidate}.json",
        run_dir / f"extrapolation.{candidate}.png",
    )


def evaluate_run(arguments: Sequence[str]) -> dict:
    from lengen.train import build, evaluate_and_write

    run_dir, tag, overrides = parse_arguments(arguments)
    cfg = load_config(run_dir, overrides)
    if not (run_dir / "results.json").is_file():  # its last.ckpt is a mid-training state
        raise ConfigError(
            f"run={run_dir}: the run never finished (no results.json); allowed: a finished run "
            f"directory, or finish this one first with resume=true hydra.run.dir={run_dir}"
        )
    validate(cfg)
    checkpoint = load_checkpoint(run_dir, "run")
    data, model, lengths = build(cfg)
    load_weights(model, checkpoint, f"overrides {overrides}")
    import torch

    tag, results_path, plot_path = output_paths(run_dir, tag)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lengen_state = checkpoint.get("lengen", {})
    return evaluate_and_write(
        cfg,
        model,
        data,
        lengths,
        device=device,
        results_path=results_path,
        plot_path=plot_path,
        train_tokens=lengen_state.get("train_tokens", 0),
        extra={
            "overrides": list(overrides),
            "tag": tag,
            "source": "checkpoints/last.ckpt",
            "train_steps": checkpoint.get("global_step"),
        },
    )
