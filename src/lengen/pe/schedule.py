"""Schedules: a different encoding (and local window, and temperature) per layer.

Production models no longer use one encoding everywhere:

* **SmolLM3** (Hugging Face, 2025) and **RNoPE** (Yang et al., 2025, "Rope to Nope and Back
  Again: A New Hybrid Attention Strategy", arXiv 2501.18795) repeat [RoPE, RoPE, RoPE, NoPE]:
  Hugging Face's ``no_rope_layer_interval`` = 4, layer i without RoPE when (i + 1) % 4 = 0
  (``configuration_llama4.py``, ``configuration_smollm3.py``). ``pe=rnope``.
* **RNoPE-SWA** (the same paper) and **SWAN-GPT** (Puvvada et al., 2025, arXiv 2504.08719):
  the RoPE layers attend within a sliding window, the NoPE layers globally. ``pe=rnope_swa``.
* **Llama 4's iRoPE** (Hugging Face ``models/llama4``: ``Llama4TextConfig`` and
  ``Llama4TextAttention``): NoPE every 4th layer with global attention and the query
  temperature (``attn_temperature_tuning``, on the NoPE layers only), chunked attention
  (``attention_chunk_size``) on the RoPE layers. ``pe=irope``.

**Form.** ``pe.layers`` lists encodings, cycled over each stack's layers: layer i uses entry
i mod len(layers). A pattern is its period ([rope, rope, rope, nope]); an explicit list has
one entry per layer. A stack shallower than the list uses its first entries (as Hugging
Face's interval on a shallow model; warned, and ``pe_info.schedule`` lists each layer's). An entry is an
encoding's name (``configs/pe/<name>.yaml`` gives its class) or a mapping ``{pe: <name>,
<option>: <value>, …}`` with that layer's options, checked by the encoding's own config class
before torch is imported (``lengen.pe.config.schedule.ScheduleConfig``). The shared options given on the
schedule itself (``pe.window``, ``pe.ssmax``, ``pe.log_length_scale``, …) apply to every layer;
a layer may set them for itself, but not to a value that disagrees with one set on the
schedule (refused, naming both keys).

**Decisions.**
* One module per entry: layers using the same entry share its parameters (as T5's bias is
  shared by a stack's layers); each entry is built with the stack's ``n_layers``, so
  per-layer parameters (RoPE-Mixed's frequencies, SSMax's s) are per layer of the stack:
  ``for_layer(i)`` is entry i mod k's ``for_layer(i)``.
* Encodings that add to the token embeddings (sinusoidal, learned) are refused in a
  schedule: ``embed`` is applied once per stack, before the first layer, so it has no layer.
* Positions are drawn once per stack (``positions``): ``pe.randomized`` and its keys belong to
  the schedule, never to a layer, and its layers must all randomize positions or all
  distances (bias encodings), one draw shared by every layer.
* Encoder–decoder models: each stack cycles ``pe.layers`` over its own depth
  (``model.n_decoder_layers`` for the decoder), so both stacks start with entry 0.
"""

from __future__ import annotations

import importlib
import warnings

from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.base import CONTEXT_KEYS
from lengen.pe.config.schedule import (
    IRoPEConfig,
    LayerPlan,
    RNoPESWAConfig,
    ScheduleConfig,
)


def encoding_class(target: str) -> type[PositionalEncoding]:
    """The class a dotted path names (``lengen.pe.rope.RoPE``)."""
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def layer_label(plan: LayerPlan) -> str:
    """An entry as figures and results name it: ``rope`` or ``rope(window=8)`` (its own
    options only)."""
    own = ScheduleConfig.defaults()
    changed = {
        key: value for key, value in plan.keywords.items() if key not in own or own[key] != value
    }
    return plan.name + (f"({', '.join(f'{k}={v}' for k, v in changed.items())})" if changed else "")


class Schedule(PositionalEncoding):
    """An encoding per layer: ``layers`` cycled over the stack (module docstring).

    Args:
        layers: the encodings, each a name or ``{pe: <name>, <option>: <value>, …}``.
    """

    Options = ScheduleConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        self.ssmax_scales = None  # its layers hold SSMax's s, each its own
        #: the entries, checked and resolved (``ScheduleConfig.check_own``)
        self.plans: list[LayerPlan] = self.derived
        context = {field: getattr(self.context, field) for field in CONTEXT_KEYS}
        self.encodings = nn.ModuleList(
            encoding_class(plan.target)(**context, **plan.keywords) for plan in self.plans
        )
        for plan, encoding in zip(self.plans, self.encodings, strict=True):
            if type(encoding).embed is not PositionalEncoding.embed:  # a user's encoding
                raise ValueError(
                    f"pe.layers: {plan.name} adds to the token embeddings, once per stack, not "
                    f"per layer; allowed: encodings of attention"
                )
        if self.n_layers < len(self.plans):  # as Hugging Face's interval on a shallow model
            warnings.warn(
                f"pe.layers: a stack of {self.n_layers} layers uses the first {self.n_layers} of "
                f"its {len(self.plans)} entries: {', '.join(self.layer_labels())}",
                stacklevel=2,
            )

    def for_layer(self, index: int) -> PositionalEncoding:
        """Layer ``index``'s encoding: entry index mod len(layers), as that layer uses it."""
        return self.encodings[index % len(self.encodings)].for_layer(index)

    def positions(self, length: int, device=None) -> Tensor:
        """One draw per stack: the first entry draws (positions, or under randomized distances
        the pass's distances, which every entry then reads)."""
        first = self.encodings[0]
        first.draw_seed = self.draw_seed
        drawn = first.positions(length, device)
        for encoding in self.encodings[1:]:
            encoding._distances = first._distances  # the same draw for every layer
        return drawn

    @property
    def provides_positions(self) -> bool:
        return any(encoding.provides_positions for encoding in self.encodings)

    def length_global(self) -> str | None:
        reasons = [super().length_global()]
        reasons += [encoding.length_global() for encoding in self.encodings]
        return next((reason for reason in reasons if reason is not None), None)

    def layer_labels(self) -> list[str]:
        """Each layer of the stack's encoding, named: ``["rope(window=8)", …, "nope"]``."""
        labels = [layer_label(plan) for plan in self.plans]
        return [labels[index % len(labels)] for index in range(self.n_layers)]

    def describe(self) -> dict:
        entries = [
            {"pe": plan.name, **encoding.describe(), **encoding.describe_options()}
            for plan, encoding in zip(self.plans, self.encodings, strict=True)
        ]
        return {"schedule": self.layer_labels(), "encodings": entries}


class RNoPESWA(Schedule):
    """RNoPE-SWA / SWAN-GPT: sliding-window RoPE layers, every 4th layer global NoPE."""

    Options = RNoPESWAConfig


class IRoPE(Schedule):
    """Llama 4's iRoPE: chunked RoPE layers, every 4th layer global NoPE with the query
    temperature."""

    Options = IRoPEConfig


__all__ = ["IRoPE", "RNoPESWA", "Schedule", "layer_label"]
