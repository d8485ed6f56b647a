"""Randomized YaRN on RoPE: Mehta, Yin & Durrett, 2026, "Randomized YaRN Improves Length
Generalization for Long-Context Reasoning", arXiv 2606.23687.

What the stored copy says (the abstract only; no method section, equations or code were in the
stored text): "a training method that improves length generalization by combining YaRN-based
positional extrapolation with randomized positional encoding and a length curriculum. During
training on short context data, tokens are assigned YaRN positional encodings sampled from a
larger position range, exposing the model to out-of-distribution positional representations
even on short-context inputs."

lengen's reading, labelled as such (docs/pe.md, "Training-time extension arms"): RoPE with
YaRN's frequencies (``lengen.pe.rope_frequencies``: factor s = ``pe.scaling_factor``, L = the
training positions or ``pe.original_max_position``), at every length, training included; in
training a sequence of T tokens gets a sorted random subset of T integers from 0 … R−1,
R = ``pe.draw_range`` or ⌈s · L⌉ (the context YaRN extends L to) — Ruoss et al.'s
randomized positions, drawn once per forward pass from the global generator that training
seeds per step. Evaluation uses 0 … T−1 with the same YaRN frequencies and temperature.
**Not built**: the paper's length curriculum (the abstract names one, not its schedule; lengen's
``data.curriculum`` orders the training lengths, a different thing), and whether the paper
samples per sequence or per batch (lengen: per batch).

A model built by hand without a training length has no L: its frequencies are plain RoPE's,
and ``describe`` says so.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.config.randomized_yarn import RandomizedYaRNConfig, yarn_range
from lengen.pe.rope import RoPE, rope_inverse_frequencies


def sorted_random_positions(
    length: int, draw_range: int, generator: torch.Generator | None = None
) -> Tensor:
    """A sorted random subset of T distinct integers from 0 … R−1 -> (T,) int64."""
    if length > draw_range:
        raise ValueError(f"pe.draw_range={draw_range} is shorter than a sequence of {length}")
    return torch.randperm(draw_range, generator=generator)[:length].sort().values


class RandomizedYaRN(RoPE):
    """RoPE with YaRN's frequencies whose training positions are a sorted random subset of
    0 … R−1 (module docstring); RoPE's other options apply as in ``pe=rope``.

    Args (beside RoPE's; ``scaling`` is ``yarn``, ``scaling_factor`` s defaults to 4):
        draw_range: R; null = ⌈s · L⌉.
    """

    Options = RandomizedYaRNConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        #: R as used; None without a training length (a draw then covers the sequence)
        self.draw_range = yarn_range(
            self.cfg.draw_range, self.cfg.scaling_factor, self.original_max_position
        )

    def _axis_frequencies(self, sequence_length=None) -> Tensor:
        if self.original_max_position is None:  # no L to scale from: plain RoPE
            return rope_inverse_frequencies(self.axis_dim, self.base, p=self.cfg.p)
        return super()._axis_frequencies(sequence_length)

    def positions(self, length: int, device: torch.device | None = None) -> Tensor:
        """(T,) int64: a sorted random subset of 0 … R−1 in training, else 0 … T−1."""
        if not self.training:
            return torch.arange(length, device=device)
        return sorted_random_positions(length, self.draw_range or length).to(device)

    def logit_temperature(self) -> float:
        return super().logit_temperature() if self.original_max_position is not None else 1.0

    def describe(self) -> dict:
        info = {
            **super().describe(),
            "positions": "training: a sorted random subset of 0 … R−1 (Randomized YaRN)",
            "draw_range": self.draw_range,
            "scaling": "yarn",
            "scaling_factor": self.cfg.scaling_factor,
            "original_max_position": self.original_max_position,
            "yarn_logit_scale": self.logit_temperature(),
        }
        if self.original_max_position is None:
            info["scaling"] = "none: no training length to scale from (a model built by hand)"
        return info
