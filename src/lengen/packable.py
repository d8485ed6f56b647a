"""Which configs may train together, and which cannot train in a pack at all. Torch-free: the
sweeper's pre-check asks these before any job starts (``lengen.sweep_packs``), so they sit
below ``lengen.preflight``, apart from the engine (``lengen.pack``, above ``lengen.train``),
which re-exports them."""

from __future__ import annotations

import hashlib
import json

from omegaconf import DictConfig, OmegaConf

from lengen.model.mixers.config.state import kept_state_entry
from lengen.pe.config import config_of

#: dotted keys a pack's members may differ in: what seeds the model's initialisation and the
#: training stream, and the learning rate (each member's AdamW groups have their own). Every
#: other key changes shapes, the schedule's form or the data's kind, which the members share.
PACKABLE_KEYS: tuple[str, ...] = ("seed", "data.seed", "optim.lr")
#: keys that say where and how a run is started, not what it trains
LOCATION_KEYS = ("hydra", "resume")
#: how the sweeper names the pack size in messages (configs/hydra/sweeper/lengen.yaml)
PACK_KEY = "hydra.sweeper.pack"
#: accelerators whose packs train their members one after another (``lengen.pack.engine``'s
#: LOOPED device types), so each member's forward can draw its dropout masks from the global
#: generator reseeded as its solo run's step reseeds it; ``auto`` may be a GPU's vmapped pack
RESEEDED_ACCELERATORS = ("cpu",)
#: trainer precisions a pack trains in: Lightning's names of full precision, and bf16 autocast
#: (fp16's loss scaler, which skips whole steps on an overflow anywhere, is not per member)
PRECISIONS = ("32-true", "32", 32, "bf16-mixed")


def _plain(cfg: DictConfig) -> dict:
    """The config without ``hydra``, resolved where it resolves (a sweeper's composed config
    may hold interpolations into Hydra's runtime, which only a running job has)."""
    container = OmegaConf.to_container(cfg, resolve=False)
    container.pop("hydra", None)
    try:
        return OmegaConf.to_container(OmegaConf.create(container), resolve=True)
    except Exception:  # noqa: BLE001 - compared as written, interpolations and all
        return container


def pack_signature(cfg: DictConfig) -> str:
    """Equal for configs that can share a pack: the resolved config without ``PACKABLE_KEYS``
    and the keys that say where a run writes (``hydra.*``, ``resume``)."""
    container = _plain(cfg)
    for key in LOCATION_KEYS:
        container.pop(key, None)
    for key in PACKABLE_KEYS:
        *parents, last = key.split(".")
        node = container
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    text = json.dumps(container, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def step_draws(cfg: DictConfig) -> list[str]:
    """The keys whose draws a training step takes from torch's global generator, which a
    solo run's step reseeds (``LitModel.training_step``), as ``key=value``: dropout, randomized
    positions, a random start offset of task positions. A CPU pack reseeds it before each
    member's forward (``lengen.pack.engine``), so these pack on ``RESEEDED_ACCELERATORS``."""
    model, pe = cfg.model, cfg.pe
    draws = [f"model.dropout={model.dropout}"] if float(model.get("dropout") or 0.0) > 0 else []
    draws += ["pe.randomized=true"] if pe.get("randomized") else []
    draws += [f"pe.start_offset={pe.start_offset}"] if int(pe.get("start_offset") or 0) else []
    return draws


def _refused(key: str, value, why: str, allowed: str | None = None) -> str:
    allowed = f"{allowed}, or" if allowed else ""
    return (
        f"{key}={value} cannot train in a pack ({PACK_KEY} > 1): {why}; allowed: {allowed} "
        f"{PACK_KEY}=1"
    ).replace(":  ", ": ")


def pack_refusal(cfg: DictConfig) -> str | None:
    """None if ``cfg`` can train in a pack; else one line naming the key and why.

    What cannot: randomness inside a training step (``step_draws``: dropout, randomized
    positions, a random start offset of task positions; all three pack on the CPU), which a
    solo run draws from its own seeded generator and a map over members cannot draw per member
    alike; several processes (DDP) or a device other than one; a compiled or FlexAttention
    forward; fp16 or bf16-true precision; a bidirectional model whose members draw training
    lengths of their own (their batches cannot be padded to one length without changing what
    the model sees); loggers other than csv and none."""
    model, pe, trainer, data = cfg.model, cfg.pe, cfg.trainer, cfg.data
    reseeded = str(trainer.get("accelerator", "auto")) in RESEEDED_ACCELERATORS
    if float(model.get("dropout") or 0.0) > 0 and not reseeded:
        return _refused(
            "model.dropout", model.dropout,
            "each member's dropout masks would come from one generator instead of its own seed "
            "(a pack on the CPU reseeds each member as its solo run)",
            "model.dropout=0.0, trainer.accelerator=cpu",
        )  # fmt: skip
    if pe.get("randomized") and not reseeded:
        return _refused(
            "pe.randomized", "true",
            "each member's random positions would come from one generator instead of its seed "
            "(a pack on the CPU reseeds each member as its solo run)",
            "pe.randomized=false, trainer.accelerator=cpu",
        )  # fmt: skip
    if int(pe.get("start_offset") or 0) > 0 and not reseeded:
        return _refused(
            "pe.start_offset", pe.start_offset,
            "each member's random offset would come from one generator instead of its seed "
            "(a pack on the CPU reseeds each member as its solo run)",
            "pe.start_offset=0, trainer.accelerator=cpu",
        )  # fmt: skip
    if getattr(config_of(pe.get("_target_")), "draws_training_positions", False):
        # Random Float Sampling, Randomized YaRN: a draw of positions in every training step
        return _refused(
            "pe", pe.get("name"),
            "each member's random positions would come from one generator instead of its seed",
            "pe=rope",
        )  # fmt: skip
    kept = kept_state_entry(model.get("mixer"), model.get("mixers"))  # lengen.model.mixers.state
    if kept is not None:
        return _refused(
            f"{kept[0]}.state_init", kept[1],
            "each member's initial states would come from one generator or one module's memory "
            "instead of its own", "state_init=zero",
        )  # fmt: skip
    if model.get("compile"):
        return _refused("model.compile", "true", "the pack's forward is not compiled")
    if model.get("attention", "auto") == "flex":
        return _refused("model.attention", "flex", "FlexAttention does not run under vmap")
    if trainer.get("precision", "32-true") not in PRECISIONS:
        return _refused(
            "trainer.precision", trainer.precision,
            "a pack trains in fp32 or under bf16 autocast (no loss scaler, no bf16 weights)",
            "trainer.precision=32-true or bf16-mixed",
        )  # fmt: skip
    for key in ("devices", "num_nodes"):
        if trainer.get(key, 1) not in (1, "1"):
            return _refused(
                f"trainer.{key}", trainer.get(key),
                "a pack trains in one process on one device", f"trainer.{key}=1",
            )  # fmt: skip
    if str(trainer.get("strategy", "auto")) != "auto":
        return _refused(
            "trainer.strategy", trainer.strategy, "a pack trains in one process on one device",
            "trainer.strategy=auto",
        )  # fmt: skip
    if int(trainer.get("accumulate_grad_batches") or 1) != 1:
        return _refused(
            "trainer.accumulate_grad_batches", trainer.accumulate_grad_batches,
            "a pack takes one batch per step", "trainer.accumulate_grad_batches=1",
        )  # fmt: skip
    interval = trainer.get("val_check_interval")
    if isinstance(interval, bool) or not isinstance(interval, int):
        return _refused(
            "trainer.val_check_interval", interval,
            "a pack validates every N steps (an integer)", "an integer number of steps",
        )  # fmt: skip
    logger = cfg.get("logger") or {}
    if logger.get("name") not in ("csv", "none", None):
        return _refused(
            "logger", logger.get("name"), "one process logs one wandb run",
            "logger=csv or logger=none",
        )  # fmt: skip
    return _length_refusal(cfg, data)


def _length_refusal(cfg: DictConfig, data) -> str | None:
    """A bidirectional model cannot pad its members' batches to one length: refused unless
    every step's length is the same for every member (``data.curriculum=fixed``, or
    ``data.min_len`` = ``data.len``; text windows have one length)."""
    if "curriculum" not in data:
        return None  # text: every window has data.len tokens
    from lengen.build import model_kind

    if model_kind(cfg) == "decoder":
        return None  # causal: right-padding is unseen by every scored position
    if data.curriculum == "fixed" or data.get("min_len") == data.get("len"):
        return None
    return _refused(
        "data.curriculum", data.curriculum,
        f"model={cfg.model.get('name')} is bidirectional and its members draw lengths of their "
        f"own each step, which cannot be padded to one without changing what it sees",
        "data.curriculum=fixed (or data.min_len=data.len)",
    )  # fmt: skip
