"""Random Float Sampling (RFS) on RoPE: Shimizu, Taniguchi & Matsuo, 2026, "Position Encoding
with Random Float Sampling Enhances Length Generalization of Transformers", arXiv 2602.14050.

What the stored copy of the paper says (its abstract and introduction; the method section and
any code were not in the stored text): "instead of selecting position indices from a predefined
discrete set, RFS uses randomly sampled continuous values, thereby avoiding out-of-distribution
(OOD) issues on unseen lengths by exposing the model to diverse indices during training"; it
"can easily be incorporated into ... the absolute sinusoidal encoding, RoPE, and ALiBi".

lengen's reading, labelled as such (docs/pe.md, "Training-time extension arms"): in training a
sequence of T tokens gets T positions drawn independently from the uniform distribution on
[0, R) and sorted (so order is kept), R = ``pe.float_range`` (null: the longest evaluation
sequence's positions); one draw per forward pass, shared by the batch's rows and every layer,
from the global generator that training seeds per step, so a batch's positions are a function
of (seed, step). It is Ruoss et al.'s randomized positions (``pe.randomized``, a sorted random
subset of the *integers* below R) with real numbers in place of integers. Evaluation uses
0 … T−1 by default; ``pe.float_eval=true`` evaluates on one fixed draw per length instead (a
third-party summary of the paper says RFS samples at inference too: unverified). RoPE rotates
by real positions unchanged (angles p · θ_i in fp32).

Only RoPE's form is built; the paper's sinusoidal and ALiBi forms are not.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.config.random_float import RandomFloatRoPEConfig, drawn_range
from lengen.pe.rope import RoPE


def random_float_positions(
    length: int, float_range: float, generator: torch.Generator | None = None
) -> Tensor:
    """T sorted draws from the uniform distribution on [0, R) -> (T,) fp32 (drawn in float64,
    so that sorting never ties two draws that fp32 would round together at small R)."""
    drawn = torch.rand(length, generator=generator, dtype=torch.float64) * float_range  # (T,)
    return drawn.sort().values.to(torch.float32)


class RandomFloatRoPE(RoPE):
    """RoPE whose training positions are sorted random floats in [0, R) (module docstring);
    every RoPE option (layout, fraction, p, scaling) applies as in ``pe=rope``.

    Args (beside RoPE's):
        float_range: R; null = the longest evaluation sequence's positions.
        float_eval: evaluate on one fixed draw per length (seeded by the length) instead of
            0 … T−1.
    """

    Options = RandomFloatRoPEConfig

    @property
    def float_range(self) -> int | None:
        """R as used (the option, or the run's longest evaluation sequence); None when neither
        is known (a model built by hand): a draw then covers its own sequence's length."""
        return drawn_range(self.cfg.float_range, self.context)

    def positions(self, length: int, device: torch.device | None = None) -> Tensor:
        """(T,) positions: sorted random floats in [0, R) in training (and under
        ``float_eval``), else 0 … T−1 (int64)."""
        if not (self.training or self.cfg.float_eval):
            return torch.arange(length, device=device)
        generator = None
        if not self.training:  # one fixed draw per length, as randomized evaluation's
            seed = length if self.draw_seed is None else self.draw_seed
            generator = torch.Generator().manual_seed(seed)
        span = self.float_range or length
        return random_float_positions(length, span, generator).to(device)

    def length_global(self) -> str | None:
        if self.cfg.float_eval:
            return (
                "random float sampling at evaluation: a sequence's positions are drawn for its "
                "whole length, so a prefix gets a different draw"
            )
        return super().length_global()

    def describe(self) -> dict:
        return {
            **super().describe(),
            "positions": "training: T sorted uniform draws on [0, R) (Random Float Sampling)",
            "float_range": self.float_range,
            "float_eval": self.cfg.float_eval,
        }
