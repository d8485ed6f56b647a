"""``plot.py attention``'s size limits, asked of the run's config.yaml before the run is loaded:
the tokens of one instance at ``--length`` (the task's own ``extent``) and, for an encoding
that computes attention itself, its weights per call. G11 and G12 (the hostile trial) were
refused only after 25-28 s, once the checkpoint was loaded and the model built; from the
config they are refused before torch is imported. ``lengen.attention_maps.map_refusal`` asks the
same of the loaded model (text runs, schedules, a user's encoding: what the config cannot say).
"""

from __future__ import annotations

from pathlib import Path

#: Longest sequence whose (H, T, T) weights are formed: maps are for looking at, not for 64k.
MAX_MAP_LENGTH = 4096


def planned_map_refusal(run_dir: Path, length: int, samples: int) -> str | None:
    """Why maps of ``samples`` instances at ``length`` cannot be formed, from the run's
    config.yaml alone; None where they can, or where the config cannot say (no task, a
    config that does not load: the loaded run answers then)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from lengen.build import model_kind
    from lengen.preflight.sizes import encoding_config

    try:
        cfg = OmegaConf.load(Path(run_dir) / "config.yaml")
        task = cfg.data.get("task")
        if task is None:
            return None
        tokens = int(instantiate(task).extent(length, model_kind(cfg))[1])
        n_heads = int(cfg.model.n_heads)
        encoding = encoding_config(cfg)
    except Exception:  # noqa: BLE001 - the loaded run says what is wrong with it
        return None
    own = None
    if encoding is not None and encoding.computes_attention:
        own = str(cfg.pe._target_).rpartition(".")[2]  # the class, as the loaded model names it
    return map_size_refusal(tokens, n_heads, own, length, samples)


def map_size_refusal(
    tokens: int, n_heads: int, own: str | None, length: int, samples: int
) -> str | None:
    """The refusal of maps of ``samples`` instances of ``tokens`` tokens at ``length``, naming
    plot.py's option to change and its largest allowed value; None when they can be formed.
    ``own``: the name of an encoding that computes attention itself (its weights are formed
    from one-hot values, at most ``MAX_OWN_WEIGHTS`` per call), else None."""
    if tokens > MAX_MAP_LENGTH:
        return (
            f"--length {length}: its sequences hold {tokens:,} tokens, and attention maps are "
            f"formed explicitly, up to {MAX_MAP_LENGTH:,} tokens; allowed: a shorter --length"
        )
    if own is None:
        return None
    from lengen.pe.config.base import MAX_OWN_WEIGHTS

    per_instance = n_heads * tokens * tokens  # (H, T, T) weights of one instance
    if samples * per_instance <= MAX_OWN_WEIGHTS:
        return None
    most = MAX_OWN_WEIGHTS // per_instance
    key, value, allowed = (
        ("--samples", samples, f"--samples {most} or fewer")
        if most >= 1
        else ("--length", length, "a shorter --length")
    )
    return (
        f"{key} {value}: {own} computes attention itself, so its weights are formed from "
        f"one-hot values, up to {MAX_OWN_WEIGHTS:,} per call; {samples} instance(s) × "
        f"{n_heads} heads × {tokens}² tokens here; allowed: {allowed}"
    )
