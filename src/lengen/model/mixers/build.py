"""A layer's mixer from its plan (``lengen.model.mixers.config.base.MixerPlan``): the class its
``_target_`` names, built with the block's sizes and the plan's options."""

from __future__ import annotations

from hydra.utils import get_class
from torch import nn

from lengen.model.mixers.config.base import MixerPlan
from lengen.pe.base import PositionalEncoding


def build_mixer(plan: MixerPlan, *, d_model, n_heads, dropout, causal, kernel) -> nn.Module:
    cls = get_class(plan.target)
    sizes = dict(d_model=d_model, n_heads=n_heads, dropout=dropout, causal=causal)
    return cls(**sizes, kernel=kernel, **plan.keywords)


def check_encoding_reaches(pe: PositionalEncoding, attends: list[bool]) -> None:
    """Refuse an encoding that acts only in attention (a rotation, a bias, its own attention)
    in a stack where no layer attends: recurrent mixers call no hook, so it would change
    nothing (the model is pe=nope's). The same kind of refusal as the stack's for task
    positions; the pre-check makes it before torch from the typed configs
    (``lengen.preflight.components.check_encoding_reaches``), this one stays for models built
    without it."""
    acts_in_attention = pe.reads_positions or pe.has_attention
    if any(attends) or not acts_in_attention or type(pe).embed is not PositionalEncoding.embed:
        return
    raise ValueError(
        f"pe: {type(pe).__name__} acts in attention layers only and no layer attends "
        f"(model.mixer / model.mixers: every layer recurrent), so it would change nothing; "
        f"allowed: pe=nope, an encoding added to the embeddings (sinusoidal, learned), or an "
        f"attention layer in model.mixers"
    )
