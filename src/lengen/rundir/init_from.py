"""What a run started from (``init_from=<run dir or .ckpt>``), as its results.json records it.

A run that starts from another run's weights records that run: its path, its run id
(``lengen.identity.run_id`` of the config the checkpoint stores, so the record names the base
run even when its directory moved), its encoding, training length and steps. The route is named
from the two encodings:

* ``drope`` — the base run had an encoding and this run has none (``pe=nope``): DroPE's
  recalibration (Gelberg et al., 2025, "Extending the Context of Pretrained LLMs by Dropping
  Their Positional Embeddings", arXiv 2512.12167; code SakanaAI/DroPE). The reference drops
  RoPE by giving every attention layer the identity rotation (``custom_models/attention.py``,
  ``NoPEAttention.forward``: cos = 1, sin = 0), copies every weight 1:1
  (``load_state_dict(source_module.state_dict())``) and trains on at the original context
  length. lengen's RoPE holds no parameters, so a RoPE checkpoint loads into the NoPE model
  unchanged (``lengen.checkpoints.load_weights`` refuses any mismatch). An encoding with
  parameters (a learned table, T5's buckets) cannot be dropped this way: loading refuses it.
* ``fine-tune`` — any other start from a run's weights.

Nothing here imports torch: the checkpoint is read by the caller.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from lengen.identity import run_id

#: the encodings that carry no positions: a run with one of them after a run without is DroPE's
NO_POSITIONS = ("lengen.pe.nope.NoPE", "lengen.pe.NoPE")
#: what the record says of the drop route, once
DROPE_SOURCE = (
    "DroPE (Gelberg et al. 2025, arXiv 2512.12167): the base run's positional encoding dropped, "
    "its weights kept 1:1, recalibrated without one"
)


def _encoding(config: dict | DictConfig) -> tuple[str | None, str | None]:
    pe = config.get("pe") or {}
    return pe.get("name"), pe.get("_target_")


def route(base: dict | None, cfg: DictConfig) -> str:
    """``drope`` when the base run had positions and this run's encoding carries none, else
    ``fine-tune`` (also when the checkpoint stores no config to tell)."""
    if not base:
        return "fine-tune"
    _, base_target = _encoding(base)
    _, target = _encoding(cfg)
    dropped = target in NO_POSITIONS and base_target not in NO_POSITIONS
    return "drope" if dropped else "fine-tune"


def init_from_record(cfg: DictConfig, checkpoint: dict) -> dict:
    """``{"init_from": {...}}`` for results.json: the base run as its checkpoint stores it and
    the route (module docstring); ``{}`` for a run that did not start from another's weights.

    ``checkpoint`` is the loaded Lightning checkpoint of ``cfg.init_from``; its
    ``["lengen"]["config"]`` is the base run's resolved config (absent in a foreign file: the
    record then names the path only)."""
    if not cfg.get("init_from"):
        return {}
    base = (checkpoint.get("lengen") or {}).get("config") or None
    record = {"path": str(cfg.init_from), "route": route(base, cfg)}
    if base:
        name, _ = _encoding(base)
        record.update(
            run_id=run_id(OmegaConf.create(base)),
            pe=name,
            train_len=(base.get("data") or {}).get("len"),
            train_steps=checkpoint.get("global_step"),
        )
    if record["route"] == "drope":
        record["method"] = DROPE_SOURCE
        # the reference recalibrates at the original context length (max_seq_length of
        # cfgs/run_cfg/*_drope.yaml equals the base model's): say so when this run does not
        if record.get("train_len") is not None and record["train_len"] != cfg.data.get("len"):
            record["note"] = (
                f"recalibrated at data.len={cfg.data.get('len')}, the base run trained at "
                f"{record['train_len']}; the reference recalibrates at the original length"
            )
    return {"init_from": record}


#: the model keys that set the shapes of its weights whatever the encoding: a base run that
#: differs in one cannot initialise this model (``check_init_from_shape``)
SHAPE_KEYS = ("_target_", "d_model", "n_layers", "d_ff", "tie_embeddings", "mixer", "mixers")


def check_init_from_shape(cfg: DictConfig) -> None:
    """An ``init_from`` run directory whose config.yaml gives the model another shape than
    this config's (``SHAPE_KEYS``) -> ValueError naming the key and both values, read from
    the base run's config.yaml without torch. The checkpoint's own load refused the same
    only once both models were built, after ~15 s, in torch's words ('size mismatch for
    embedding.weight …': KB79, docs/trials/kept-back-2026-12-02.md). A .ckpt file, or a run
    directory without a readable config.yaml, is left to that load."""
    from pathlib import Path

    if not cfg.get("init_from"):
        return
    path = Path(str(cfg.init_from)) / "config.yaml"
    try:
        base = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception:  # noqa: BLE001 - a file, a damaged or absent config: the load decides
        return
    model = base.get("model") if isinstance(base, dict) else None
    if not isinstance(model, dict):
        return
    ours = OmegaConf.to_container(cfg.model, resolve=True)
    for key in SHAPE_KEYS:
        if key in model and _shape(model.get(key)) != _shape(ours.get(key)):
            raise ValueError(
                f"init_from={cfg.init_from}: its run has model.{key}={model[key]}, this config "
                f"model.{key}={ours.get(key)}, so its weights cannot initialise this model; "
                f"allowed: model.{key}={model[key]} (the base run's shape; the encoding, data "
                f"and training keys may differ)"
            )


def _shape(value):
    """A shape key's value as it sets the weights: a mixer by its name (its training options,
    ``tbptt``, ``state_init``, may change between the runs), a list of them by theirs."""
    if isinstance(value, dict):
        return value.get("mixer")
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return value
