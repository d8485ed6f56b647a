"""Reading lengen checkpoints back: for eval.py (``run=``) and fine-tuning (``init_from=``)."""

from __future__ import annotations

from pathlib import Path

from lengen.config import ConfigError


class Preempted(Exception):  # noqa: N818 - an outcome, not a bug
    """A signal stopped training; ``checkpoint`` holds the state after ``step`` steps."""

    def __init__(self, signum: int, step: int, checkpoint: Path):
        import signal

        self.signum = signum
        self.step = step
        self.checkpoint = checkpoint
        super().__init__(
            f"interrupted by {signal.Signals(signum).name} at step {step}: state saved to "
            f"{checkpoint}; continue with resume=true and the same hydra.run.dir"
        )


def checkpoint_file(path: str | Path, key: str) -> Path:
    """A run directory (its checkpoints/last.ckpt) or a .ckpt file -> the file."""
    path = Path(path)
    file = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(
            f"{key}={path}: no checkpoint there (checkpoints/last.ckpt); the run never finished "
            f"training, so there is nothing to load"
        )
    return file


def load_checkpoint(path: str | Path, key: str) -> dict:
    import torch

    file = checkpoint_file(path, key)
    try:
        return torch.load(file, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - any unpickling failure means a bad file
        raise ConfigError(
            f"{key}={path}: {file.name} cannot be read ({type(error).__name__}: {error})"
        ) from None


def load_weights(model, checkpoint: dict, key: str) -> None:
    """Load a Lightning checkpoint's model weights; a shape mismatch is a user error."""
    state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0]
        raise ConfigError(
            f"{key}: the checkpoint holds a different model than this config builds: {detail}"
        ) from None


# -- resuming ---------------------------------------------------------------------------------
#: Keys that may differ between an interrupted run and its resumption: they change where and
#: how it runs, or what is evaluated afterwards, never what is trained.
RESUME_MAY_CHANGE = (
    "resume",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.num_nodes",
    "trainer.strategy",
    "trainer.enable_progress_bar",
    "trainer.log_every_n_steps",
    "trainer.checkpoint_every_n_steps",
    "logger",
    "eval",
)


def is_rank_zero() -> bool:
    """Whether this process is the first of a multi-process run (or the only one), read from
    the variables Lightning, torchrun and SLURM set, so that it is known before any import."""
    import os

    for variable in ("RANK", "SLURM_PROCID"):
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable]) == 0
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def _flatten(node, prefix: str = "") -> dict:
    if isinstance(node, dict):
        flat = {}
        for key, value in node.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat or {prefix[:-1]: {}}
    return {prefix[:-1]: node}


def config_differences(saved: dict, current: dict) -> list[str]:
    """Keys whose values differ between two resolved configs, except RESUME_MAY_CHANGE."""
    before, after = _flatten(saved), _flatten(current)
    changed = []
    for key in sorted(set(before) | set(after)):
        if any(key == k or key.startswith(k + ".") for k in RESUME_MAY_CHANGE):
            continue
        if before.get(key, "<absent>") != after.get(key, "<absent>"):
            changed.append(f"{key} ({before.get(key, '<absent>')} -> {after.get(key, '<absent>')})")
    return changed


def check_resume(cfg, run_dir: Path, rank_zero: bool = True) -> tuple[Path, int] | None:
    """The checkpoint to continue from and its step (``resume=true``), or None for a fresh run.

    A fresh run refuses a directory holding an interrupted run's checkpoint; resuming refuses a
    missing or unreadable checkpoint and a config that would train something else.
    """
    from omegaconf import OmegaConf

    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    if not cfg.resume:
        if rank_zero and checkpoint.exists():
            raise ConfigError(
                f"hydra.run.dir={run_dir} holds an interrupted run (checkpoints/last.ckpt, no "
                f"results.json); allowed: resume=true to continue it, or a new hydra.run.dir"
            )
        return None
    if not checkpoint.is_file():
        raise ConfigError(
            f"resume=true: no checkpoint at {checkpoint}; allowed: resume=true with "
            f"hydra.run.dir=<the interrupted run's directory>, or resume=false"
        )
    saved_path = run_dir / "config.yaml"
    if saved_path.is_file():
        saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
        current = OmegaConf.to_container(cfg, resolve=True)
        current.pop("hydra", None)
        changed = config_differences(saved, current)
        if changed:
            raise ConfigError(
                f"resume=true: the config differs from the run's config.yaml in {', '.join(changed)}; "
                f"allowed: the same config, changing only {', '.join(RESUME_MAY_CHANGE[1:])}"
            )
    # a truncated or foreign file is refused here, before Lightning would fail on it
    state = load_checkpoint(checkpoint, "resume")
    if "global_step" not in state or "state_dict" not in state:
        raise ConfigError(f"resume: {checkpoint} is not a Lightning checkpoint of a lengen run")
    return checkpoint, state["global_step"]
