"""DAPE: data-adaptive positional encoding (Zheng, Gao, Shi, Huang, Li, Xiong, Ren, Ng, Jiang,
Li & Li, 2024, "DAPE: Data-Adaptive Positional Encoding for Length Extrapolation", NeurIPS
2024, arXiv 2405.14722).

A bias encoding's bias B (ALiBi, KERPLE or FIRE, ``pe.bias``) is made to depend on the content:
a small MLP f reads, for every (query i, key j), the scaled logits of all heads together with
the bias of all heads, and adds its output to the logits:

    x = q·kᵀ / √d                       (B, H, Tq, Tk): the scores of the H heads
    f([x; B]) = W₂ · LeakyReLU(W₁ · [x_{:,i,j}; B_{:,i,j}] + b₁) + b₂,
                W₁: 2H → ``mlp_width``, W₂: ``mlp_width`` → H
    logits = x + B + f([x; B])          (``pe.form: reference``, the default)
    logits = x + f([x; B])              (``pe.form: paper``)

**Read for this**: the authors' code, chuanyang-Zheng/DAPE, ``DAPE.py`` (``AliBi_DAPE``,
``ParallelKerpleLog_DAPE``, ``FIRE_DAPE``) and ``megatron/model/transformer.py`` (where the
module is called) with ``megatron/model/positional_embeddings.py`` (``AliBi_C``,
``ParallelKerpleLog_C``, ``FIRE_C``, the same modules). What they do, and lengen with them:

* the MLP is ``Linear(2H, mlp_width)``, ``LeakyReLU`` (slope 0.01), ``Linear(mlp_width, H)``,
  with PyTorch's default initialisation, width 32 by default; its input is the concatenation
  [x; B] along the head channel, x first;
* x is the scaled score q·kᵀ/√d (Megatron's ``baddbmm`` with ``alpha = 1/norm_factor``), the
  module returns x + B + f([x; B]), and the causal mask is applied **after** it (the fused
  scale-mask-softmax). The MLP acts on each (i, j) alone, mixing heads only, so a masked key
  never reaches a visible entry: causal models keep the prefix property (tested). lengen feeds
  the MLP zeros for the bias at masked entries (B is −inf there) and keeps them masked;
* the form without the separate B term (``pe.form: paper``) is our reading of the paper's
  defining equation, in which B enters through f only; the reference code's x + B + f is the
  default. Both have the same parameters.

Our choices and deviations:

* **one MLP and one bias for the stack**: the authors build a DAPE module (MLP and bias
  parameters) in every attention layer; here, as for FIRE and CoPE, one module serves all layers
  of a stack;
* the bias is lengen's own encoding, unchanged, with its options (``pe.bias_options``, checked by
  its config class: ``pe.bias_options.variant must be one of log, power``): its defaults sized
  for the run (FIRE's threshold), its randomized distances, its non-causal forms. The reference
  FIRE inside DAPE uses LeakyReLU in FIRE's own MLP; lengen's FIRE keeps the paper's ReLU;
* the shared options (``pe.randomized``, …) are DAPE's and passed to the bias, which draws the
  positions (``positions``); the log-length scale multiplies q and with it x;
* memory: attention runs an explicit softmax per block of queries (the contextual path, as
  CoPE's), so memory grows linearly with length; the MLP's hidden layer is ``mlp_width / H``
  times the block (transient), so DAPE's blocks are ``score_copies`` times smaller than other
  encodings' (the same total work, in more, smaller pieces);
* no form on grids (ALiBi's grid form is ALiBi's alone).
"""

from __future__ import annotations

import dataclasses
import importlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.dape import DAPEConfig

#: the negative slope of the reference's ``nn.LeakyReLU()``
LEAKY_SLOPE = 0.01


def dape_mlp(
    features: Tensor, in_weight: Tensor, in_bias: Tensor, out_weight: Tensor, out_bias: Tensor
) -> Tensor:
    """f over the channel dimension: features (B, 2H, c, Tk) -> (B, H, c, Tk).

    in_weight (W, 2H), in_bias (W,), out_weight (H, W), out_bias (H,)."""
    channels_last = features.permute(0, 2, 3, 1)  # (B, c, Tk, 2H)
    hidden = F.leaky_relu(channels_last @ in_weight.T + in_bias, LEAKY_SLOPE)  # (B, c, Tk, W)
    return (hidden @ out_weight.T + out_bias).permute(0, 3, 1, 2)  # (B, H, c, Tk)


class DAPE(PositionalEncoding):
    """A bias encoding (``pe.bias``) plus an MLP over [scores; bias] of all heads.

    Args:
        bias: ``alibi``, ``kerple`` or ``fire``: the encoding whose bias B DAPE adapts.
        bias_options: that encoding's own options (null: its defaults).
        mlp_width: hidden units of f (the reference's 32).
        form: ``reference`` (x + B + f([x; B])) or ``paper`` (x + f([x; B])).
    """

    Options = DAPEConfig

    #: f reads each (query, key)'s scores and bias alone, so the kernels may split the keys
    #: into tiles under an online softmax (``lengen.model.blocked.tiled_contextual_attention``)
    contextual_per_score = True

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)  # self.derived: the bias encoding's checked keywords
        width = self.cfg.mlp_width
        module, _, name = self.cfg.bias_target().rpartition(".")
        wrapped = getattr(importlib.import_module(module), name)
        self.bias_encoding = wrapped(**dataclasses.asdict(self.context), **self.derived)
        # nn.Linear's default initialisation, U(±1/√fan_in) for weights and biases, as plain
        # parameters: the model's re-initialisation of linear layers leaves them alone
        heads = self.n_heads
        in_bound, out_bound = 1 / math.sqrt(2 * heads), 1 / math.sqrt(width)
        self.mlp_in_weight = nn.Parameter(
            torch.empty(width, 2 * heads).uniform_(-in_bound, in_bound)
        )
        self.mlp_in_bias = nn.Parameter(torch.empty(width).uniform_(-in_bound, in_bound))
        self.mlp_out_weight = nn.Parameter(
            torch.empty(heads, width).uniform_(-out_bound, out_bound)
        )
        self.mlp_out_bias = nn.Parameter(torch.empty(heads).uniform_(-out_bound, out_bound))

    def positions(self, length: int, device: torch.device | None = None) -> Tensor:
        """The bias encoding's positions (and, under randomized distances, its draw)."""
        self.bias_encoding.draw_seed = self.draw_seed
        return self.bias_encoding.positions(length, device)

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        return self.bias_encoding.score_bias(heads, q_positions, k_positions)  # B, fp32

    def mlp(self, features: Tensor) -> Tensor:
        """f with this module's parameters, in fp32: (B, 2H, c, Tk) -> (B, H, c, Tk)."""
        return dape_mlp(
            features.float(),
            self.mlp_in_weight.float(),
            self.mlp_in_bias.float(),
            self.mlp_out_weight.float(),
            self.mlp_out_bias.float(),
        )

    def contextual_logits(
        self, q: Tensor, logits: Tensor, *, scores: Tensor | None = None, bias: Tensor | None = None
    ) -> Tensor:
        # logits = scores + bias: (B, H, c, Tk), −inf where hidden; bias (H or 1, c, Tk)
        with torch.autocast(logits.device.type, enabled=False):
            if scores is None:  # a caller that does not separate the terms: logits, no bias
                scores, bias = logits, None
            if bias is None:
                bias = torch.zeros_like(scores)
            hidden = logits.isneginf()  # (B, H, c, Tk): masked keys
            x = scores.float().masked_fill(hidden, 0.0)
            b = bias.float().expand_as(x).masked_fill(hidden, 0.0)
            adapted = self.mlp(torch.cat((x, b), dim=1))  # f([x; B]), (B, H, c, Tk)
            # the kernel's logits already hold B; the paper's form has B through f only
            return adapted if self.cfg.form == "reference" else adapted - b

    @property
    def score_copies(self) -> int:
        # scores, bias, logits, x, b, mask, output: ~7 of (B, H, c, Tk); [x; B]: 2; the hidden
        # layer before and after its activation, and channels-last copies: ~3·W/H
        return 9 + 3 * math.ceil(self.cfg.mlp_width / self.n_heads)

    def describe(self) -> dict:
        return {
            "bias": self.cfg.bias,
            "form": self.cfg.form,
            "mlp_width": self.cfg.mlp_width,
            "bias_encoding": self.bias_encoding.describe(),
        }
