"""Reading lengen checkpoints back: for eval.py (``run=``) and fine-tuning (``init_from=``)."""

from __future__ import annotations

from pathlib import Path

from lengen.config import ConfigError


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
