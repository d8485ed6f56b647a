"""Length-aware attention temperatures: per-query multipliers of the q·k logits.

Shared options of every encoding (``lengen.pe.config.base.EncodingConfig``), applied by
``PositionalEncoding.query_scale`` to each query's row of q (so additive biases are left alone).
Log-length scaling and SSMax, both functions of log n, are exclusive on a layer
(``lengen.pe.config.base.LENGTH_TEMPERATURES``); Llama 4's temperature and YaRN's constant
``logit_temperature`` compose with either (their product multiplies the query).

* **Log-length scaling** (Chiang & Cholak, 2022): max(1, log n / log n_train).
* **Llama 4's query temperature** (Hugging Face transformers,
  ``models/llama4/modeling_llama4.py``, ``Llama4TextAttention.forward``; defaults from
  ``configuration_llama4.py``, ``Llama4TextConfig``: ``attn_temperature_tuning=True``,
  ``floor_scale=8192``, ``attn_scale=0.1``): the query of the token at index t (0-based,
  Hugging Face's ``cache_position``) is multiplied by 1 + attn_scale · log1p(⌊(t + 1) /
  floor_scale⌋), on the NoPE layers only (``use_rope`` false); the RoPE layers, whose attention
  is chunked, get none. It depends on the token's index, not on how many keys it sees.
* **Scalable-Softmax** (SSMax; Nakanishi, 2025, "Scalable-Softmax Is Superior for Attention",
  arXiv 2501.19399): softmax(s · log n · z), z the logits of a query that sees n keys, s a
  learned scalar per layer and head (the paper's form, implemented as it suggests by scaling
  the query). n is the number of keys the query actually sees: i + 1 in causal attention
  (plus any cached prefix), min(i + 1, w) under a sliding window, the position within its
  chunk + 1 under chunks (``lengen.pe.local.visible_keys``); bidirectionally the sequence's
  length (or the window's or chunk's keys).
  **Initialisation** of s: 1 / (mean of log n over the queries of a training sequence), so
  that s · log n averages 1 over training and SSMax starts as the softmax on average. For
  causal training on L = 1,024 tokens that is 1 / (log(1024!) / 1024) = 0.1685. This is our
  derivation, not a value confirmed from the paper: the stored copies show its Figure 1 with
  s = 0.43 as an illustration only, and third-party code defaults to that 0.43 (docs/pe.md).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: the training length at which our initialisation gives 0.168 (docstring above); used when
#: the run's training positions are unknown (an encoding built directly)
SSMAX_PAPER_TRAIN_LENGTH = 1024


def log_length_factor(keys: Tensor, trained_keys: int) -> Tensor:
    """max(1, log n / log n_train) for n = ``keys`` (any shape) -> float64, same shape."""
    return (keys.double().log() / math.log(max(trained_keys, 2))).clamp(min=1.0)


def llama4_query_temperature(token_index: Tensor, floor_scale: int, attn_scale: float) -> Tensor:
    """Llama 4's per-token query multiplier, 1 + attn_scale · log1p(⌊(t + 1) / floor_scale⌋),
    for 0-based token indices t (any shape) -> float64, same shape."""
    steps = torch.floor((token_index.double() + 1.0) / floor_scale)
    return torch.log1p(steps) * attn_scale + 1.0


def ssmax_initial_scale(keys: Tensor) -> float:
    """s such that s · log n averages 1 over training's queries, n = ``keys`` (the keys each
    query of a training sequence sees, ≥ 1); the paper's length when no key count exceeds 1."""
    mean_log = float(keys.double().log().mean())
    if mean_log <= 0.0:
        positions = torch.arange(1, SSMAX_PAPER_TRAIN_LENGTH + 1, dtype=torch.float64)
        mean_log = float(positions.log().mean())
    return 1.0 / mean_log


__all__ = ["llama4_query_temperature", "log_length_factor", "ssmax_initial_scale"]
