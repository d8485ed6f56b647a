"""A layer's mixer from its plan (``lengen.model.mixers.config.base.MixerPlan``): the class its
``_target_`` names, built with the block's sizes and the plan's options."""

from __future__ import annotations

from hydra.utils import get_class
from torch import nn

from lengen.model.mixers.config.base import MixerPlan


def build_mixer(plan: MixerPlan, *, d_model, n_heads, dropout, causal, kernel) -> nn.Module:
    cls = get_class(plan.target)
    sizes = dict(d_model=d_model, n_heads=n_heads, dropout=dropout, causal=causal)
    return cls(**sizes, kernel=kernel, **plan.keywords)
