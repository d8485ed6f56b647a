"""FIRE: functional interpolation for relative positions (Li, You, Guruganesh, Ainslie, Ontañón,
Zaheer, Sanghai, Yang, Kumar & Bhojanapalli, 2023, "Functional Interpolation for Relative
Positions Improves Long Context Transformers", ICLR 2024).

The logit of query i and key j (causal: i ≥ j) gets, per head,

    b(i, j) = f_θ( ψ(i − j) / ψ(max(L, i)) ),   ψ(x) = log(c·x + 1),

where f_θ is a small MLP (1 → ``mlp_width`` → heads, ReLU; width 32 in the paper), c > 0 is a
learnable log-transform scale and L a learnable threshold ("progressive interpolation": for
i < L the normaliser is the constant ψ(L), so the bias is a function of i − j alone; for i ≥ L
the input ψ(i − j)/ψ(i) stays in [0, 1] however long the sequence grows).

Details as in the paper's reference code (its appendix listing): c is initialised to 0.1 and
enters as ψ(x) = log(|c·x| + 1); L = |ℓ| · L₀ with a learnable multiplier ℓ (initialised to 1) of
a fixed initial threshold L₀ (``pe.init_threshold``; 512 in the listing); the normaliser gets
+ 1e-6; the MLP
has PyTorch's default ``nn.Linear`` initialisation (uniform ±1/√fan_in). The MLP is stored as
plain parameters rather than ``nn.Linear`` so that the model's GPT-2 re-initialisation of linear
layers leaves the paper's initialisation alone.

**Threshold sized for the run.** The paper's L₀ = 512 belongs to its language models trained
on 2,048 tokens: queries past a quarter of the training length are progressively interpolated
in training already. This tool trains on 16–258 positions, where L₀ = 512 would keep every
training query (and every evaluation query up to 512) below the threshold: the normaliser is
the constant ψ(512), the MLP only ever sees inputs ψ(i − j)/ψ(512) below ψ(train)/ψ(512), and
evaluation past training feeds it inputs it never saw: no interpolation at all.
``pe.init_threshold: null`` (the default) keeps the paper's ratio, L₀ = train_positions / 4;
without known training positions (a module built directly) the paper's 512.
``pe.init_threshold=512`` restores the paper's value; ``describe()`` records L₀ and its source.

Randomized positions (``pe.randomized``): with ``randomized_relative=distances`` (the yaml's
default) i − j is replaced by the drawn distance d_{i−j} and the query position i by d_i, its
drawn distance to the first token (our choice; Ruoss et al.'s code has no FIRE).

Our choices where the paper is silent: a non-causal stack uses |i − j| in the numerator (which
is also what the reference code's |c·(i − j)| computes) and keeps ψ(max(L, i)) with i the query
position; one f_θ, c, L serves every layer of the stack (the framework's one bias per stack, as
for T5). Memory: the MLP's hidden layer is ``mlp_width / n_heads`` times the bias block it
produces (attention builds bias blocks of at most 2²⁴ elements, so ≤ 512 MiB at width 32 and 4
heads, transient at evaluation).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.fire import FIREConfig

#: the paper's constant added to the normaliser ψ(max(L, i))
NORMALISER_EPS = 1e-6


def fire_log_transform(x: Tensor, c: Tensor) -> Tensor:
    """ψ(x) = log(|c·x| + 1), elementwise, fp32."""
    return torch.log1p((c * x.to(torch.float32)).abs())


def fire_interpolated_input(
    distance: Tensor, query_position: Tensor, c: Tensor, threshold: Tensor
) -> Tensor:
    """ψ(distance) / (ψ(max(L, query_position)) + 1e-6), broadcastable -> fp32."""
    normaliser = torch.maximum(query_position.to(torch.float32), threshold)
    return fire_log_transform(distance, c) / (fire_log_transform(normaliser, c) + NORMALISER_EPS)


def fire_normalized_distance(
    q_positions: Tensor, k_positions: Tensor, c: Tensor, threshold: Tensor
) -> Tensor:
    """ψ(|i − j|) / (ψ(max(L, i)) + 1e-6) for broadcastable query positions i and key
    positions j -> fp32 of the broadcast shape."""
    distance = (q_positions - k_positions).abs()
    return fire_interpolated_input(distance, q_positions, c, threshold)


def fire_mlp(
    x: Tensor, in_weight: Tensor, in_bias: Tensor, out_weight: Tensor, out_bias: Tensor
) -> Tensor:
    """f_θ: x (...) -> (..., H) via relu(x·w_in + b_in) @ W_outᵀ + b_out.

    in_weight, in_bias: (W,); out_weight: (H, W); out_bias: (H,).
    """
    hidden = torch.relu(x[..., None] * in_weight + in_bias)  # (..., W)
    return hidden @ out_weight.T + out_bias  # (..., H)


class FIRE(PositionalEncoding):
    """Learned function of the progressively interpolated relative distance, per head.

    Args:
        mlp_width: hidden units of f_θ (32 in the paper).
        init_c: initial log-transform scale c (0.1 in the paper).
        init_threshold: L₀, the initial threshold L; None = train_positions / 4 (the paper's
            512 for 2,048-token training), or 512 when the training positions are unknown.
    """

    # bias_of_distance: randomized positions randomize the distances (base class)
    Options = FIREConfig
    #: the paper's initial threshold and the training length it served (Li et al., 2023)
    PAPER_THRESHOLD, PAPER_TRAIN_LENGTH = 512.0, 2048

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        init_threshold, self.init_threshold_source = self.cfg.init_threshold, "given"
        if init_threshold is None:
            init_threshold, self.init_threshold_source = self.default_threshold()
        mlp_width = self.cfg.mlp_width
        #: L₀ as used: ``pe.init_threshold``, or derived from the training length where it is null
        self.init_threshold = float(init_threshold)
        self.c = nn.Parameter(torch.tensor(self.cfg.init_c))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))  # L = |ℓ| · L₀
        # f_θ with nn.Linear's default initialisation: U(±1/√fan_in) for weights and biases
        in_bound, out_bound = 1.0, 1.0 / math.sqrt(mlp_width)
        self.mlp_in_weight = nn.Parameter(torch.empty(mlp_width).uniform_(-in_bound, in_bound))
        self.mlp_in_bias = nn.Parameter(torch.empty(mlp_width).uniform_(-in_bound, in_bound))
        self.mlp_out_weight = nn.Parameter(
            torch.empty(self.n_heads, mlp_width).uniform_(-out_bound, out_bound)
        )
        self.mlp_out_bias = nn.Parameter(torch.empty(self.n_heads).uniform_(-out_bound, out_bound))

    def default_threshold(self) -> tuple[float, str]:
        """``pe.init_threshold: null`` -> (L₀, where it came from)."""
        if not self.train_positions:
            return self.PAPER_THRESHOLD, "the paper's 512 (training positions unknown)"
        ratio = self.PAPER_TRAIN_LENGTH / self.PAPER_THRESHOLD  # 4
        return self.train_positions / ratio, f"train_positions {self.train_positions} / 4"

    @property
    def threshold(self) -> Tensor:
        """The current threshold L = |ℓ| · L₀ (0-dim, fp32)."""
        return self.threshold_multiplier.to(torch.float32).abs() * self.init_threshold

    def mlp(self, x: Tensor) -> Tensor:
        """f_θ with this module's parameters, in fp32: x (...) -> (..., H)."""
        return fire_mlp(
            x.to(torch.float32),
            self.mlp_in_weight.to(torch.float32),
            self.mlp_in_bias.to(torch.float32),
            self.mlp_out_weight.to(torch.float32),
            self.mlp_out_bias.to(torch.float32),
        )

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32
        with torch.autocast(q_positions.device.type, enabled=False):
            # |i − j| and i, or the randomized distances d_|i−j| and d_i (base class)
            distance = self.relative_distance(q_positions, k_positions).abs()
            query = self.relative_distance(q_positions, torch.zeros_like(q_positions))
            x = fire_interpolated_input(
                distance, query, self.c.to(torch.float32), self.threshold
            )  # e.g. (1, Tq, Tk)
            values = self.mlp(x)  # e.g. (1, Tq, Tk, H)
            shape = torch.broadcast_shapes(heads.shape, x.shape)  # e.g. (H, Tq, Tk)
            index = heads.expand(shape).unsqueeze(-1)  # e.g. (H, Tq, Tk, 1)
            return values.expand(*shape, self.n_heads).gather(-1, index).squeeze(-1)

    @property
    def score_copies(self) -> int:
        # the MLP's hidden layer (c, Tk, W) before and after its activation, against a score
        # block (B, H, c, Tk) at batch 1: 2·W/H; the input, output and gather: ~3
        return 3 + 2 * math.ceil(self.cfg.mlp_width / self.n_heads)

    def describe(self) -> dict:
        return {
            "mlp_width": self.cfg.mlp_width,
            "c": round(float(self.c.detach()), 8),
            "init_threshold": self.init_threshold,
            "init_threshold_from": self.init_threshold_source,
            "threshold": round(float(self.threshold.detach()), 6),
        }
