"""A layer's mixer from its plan (``lengen.model.mixers.config.base.MixerPlan``): the class its
``_target_`` names, built with the block's sizes and the plan's options."""

from __future__ import annotations

import warnings

from hydra.utils import get_class
from torch import nn

from lengen.model.mixers.config.base import MixerPlan
from lengen.pe.base import PositionalEncoding


def build_mixer(plan: MixerPlan, *, d_model, n_heads, dropout, causal, kernel) -> nn.Module:
    cls = get_class(plan.target)
    sizes = dict(d_model=d_model, n_heads=n_heads, dropout=dropout, causal=causal)
    return cls(**sizes, kernel=kernel, **plan.keywords)


def warn_if_encoding_unused(pe: PositionalEncoding, attends: list[bool]) -> None:
    """Warn when no layer of a stack attends and its encoding acts only in attention (a
    rotation, a bias, its own attention): recurrent mixers call no hook, so the encoding changes
    nothing and the model is the same as with pe=nope. Not refused: the config checks cannot see
    the encoding and the mixers together before torch (docs/models.md)."""
    acts_in_attention = pe.reads_positions or pe.has_attention
    if any(attends) or not acts_in_attention or type(pe).embed is not PositionalEncoding.embed:
        return
    warnings.warn(
        f"model.mixer: no layer attends, so the encoding ({type(pe).__name__}) changes nothing: "
        f"recurrent mixers read no positions (pe=nope is the same model; docs/models.md)",
        stacklevel=3,
    )
