"""KERPLE: kernelized relative positional embedding (Chi, Fan, Ramadge & Rudnicky, 2022,
"KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation", NeurIPS 2022).

Each head h adds a conditionally positive definite kernel of the distance |m − n| to its logits,
with two learnable per-head parameters r1, r2 > 0 (``pe.variant``):

* ``log``   (the paper's best, "KERPLE-log"): bias = −r1 · log(1 + r2 · |m − n|);
* ``power`` ("KERPLE-power"): bias = −r1 · |m − n|^r2, 0 < r2 ≤ 2.

Positivity as in the authors' code (github.com/chijames/KERPLE, ``ParallelKerpleLog`` /
``ParallelKerplePower``): the raw parameters are projected in place, before every use, onto
r ≥ 0.01 (and r2 ≤ 2 for ``power``), i.e. projected gradient descent: the optimiser updates the
parameter freely and the next forward clips it back, without changing its gradient. The
projection writes ``.data`` (no autograd version bump), exactly like the authors' code. Under
``model.attention=flex`` the bias table is still computed eagerly (the compiled ``score_mod``
only reads it), so the projection stays outside compiled code.

Initialisation as in the authors' code, uniform per head: ``log``: r1 ~ U(0, 2), r2 ~ U(0, 1);
``power``: r1 ~ U(0, 1), r2 ~ U(0, 2) (their ``bias_p`` is r1 for log and r2 for power).

The kernel is symmetric in m − n, so a non-causal stack uses it in both directions (the paper
defines causal language models only; this is our choice). One set of r1, r2 serves every
layer of the stack, as in the authors' code (one ``ParallelKerpleLog`` passed to all layers).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.kerple import KERPLE_VARIANTS as VARIANTS
from lengen.pe.config.kerple import KERPLEConfig

#: the authors' lower bound for r1, r2 (``self.eps = 1e-2``)
MIN_PARAMETER = 0.01
#: the authors' upper bound for the exponent r2 of the power variant
MAX_POWER = 2.0


def kerple_bias(distance: Tensor, r1: Tensor, r2: Tensor, variant: str) -> Tensor:
    """KERPLE bias for distances |m − n| >= 0 and broadcastable per-head r1, r2 -> fp32.

    ``log``: −r1 · log(1 + r2 · distance); ``power``: −r1 · distance^r2.
    """
    distance = distance.to(torch.float32)
    if variant == "log":
        return -r1 * torch.log1p(r2 * distance)
    if variant == "power":
        return -r1 * distance.pow(r2)
    raise ValueError(f"pe.variant must be one of {', '.join(VARIANTS)}; got {variant!r}")


class KERPLE(PositionalEncoding):
    """Kernelized distance penalty per head, with learnable r1, r2 (shape (H,) each).

    Args:
        variant: ``log`` (default) or ``power``.
    """

    bias_is_relative = True  # a function of q − k: attention reads a table per offset
    # bias_of_distance: randomized positions randomize the distances (base class)
    Options = KERPLEConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        # the authors' scales: the multiplier of log is U(0, 2), the exponent of power U(0, 2)
        r1_scale, r2_scale = (2.0, 1.0) if self.cfg.variant == "log" else (1.0, 2.0)
        self.r1 = nn.Parameter(torch.rand(self.n_heads) * r1_scale)
        self.r2 = nn.Parameter(torch.rand(self.n_heads) * r2_scale)

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Clip r1, r2 into their feasible range in place (the authors' ``.data.clamp``)."""
        self.r1.data.clamp_(min=MIN_PARAMETER)
        self.r2.data.clamp_(
            min=MIN_PARAMETER, max=MAX_POWER if self.cfg.variant == "power" else None
        )

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32
        self.project_parameters()
        with torch.autocast(q_positions.device.type, enabled=False):
            distance = self.relative_distance(q_positions, k_positions).abs()  # e.g. (1, Tq, Tk)
            r1 = self.r1.to(torch.float32)[heads]  # e.g. (H, 1, 1)
            r2 = self.r2.to(torch.float32)[heads]
            return kerple_bias(distance, r1, r2, self.cfg.variant)

    def describe(self) -> dict:
        self.project_parameters()
        return {
            "variant": self.cfg.variant,
            "r1": [round(r, 6) for r in self.r1.detach().float().tolist()],
            "r2": [round(r, 6) for r in self.r2.detach().float().tolist()],
        }
