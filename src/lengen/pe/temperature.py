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

from lengen.pe import local

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


# -- the encoding's side: every query's multiplier, from its options -----------------------------
class LogitScaling:
    """The attention temperatures of ``PositionalEncoding`` (its base, beside the functions it
    applies): the constant (``logit_temperature``), the log-length factor, SSMax and Llama 4's
    query temperature, per query. Reads the encoding's ``cfg``, ``train_positions``, ``axes``,
    ``causal``, ``ssmax_scales``, ``n_heads`` and ``layer``."""

    def logit_temperature(self) -> float:
        """A constant multiplier of the q·k logits, the same at every length (1.0; YaRN's)."""
        return 1.0

    def length_factor(self, keys: int) -> float:
        """The log-length factor for a query attending to ``keys`` keys: max(1, log n /
        log n_train) with ``log_length_scale``, else 1.0."""
        trained = self.trained_keys
        if not self.cfg.log_length_scale or not trained or keys <= trained:
            return 1.0
        return math.log(keys) / math.log(max(trained, 2))

    @property
    def trained_keys(self) -> int | None:
        """Tokens of a training sequence for the log-length factor: ``train_positions``, on A
        axes the cells of the training grid, train_positions^A (a readout slot aside)."""
        if not self.train_positions:
            return self.train_positions
        return self.train_positions**self.axes

    def attention_scale(self, length: int) -> float:
        """Multiplier of the q·k logits when every query attends to ``length`` keys
        (bidirectional attention): ``logit_temperature() · length_factor(length)``."""
        return self.length_factor(length) * self.logit_temperature()

    @property
    def local(self) -> bool:
        """Whether queries see only some keys (``pe.window`` or ``pe.chunk``)."""
        return self.cfg.window is not None or self.cfg.chunk is not None

    def visible_keys(self, q_len: int, k_len: int, causal: bool) -> Tensor:
        """How many keys each of the last Tq of Tk queries sees -> (Tq,) float64."""
        return local.visible_keys(
            q_len, k_len, causal=causal, window=self.cfg.window, chunk=self.cfg.chunk
        )

    def ssmax_initial_scale(self) -> float:
        """SSMax's s at initialisation: 1 / mean log n over a training sequence's queries."""
        trained = self.trained_keys or SSMAX_PAPER_TRAIN_LENGTH
        return ssmax_initial_scale(self.visible_keys(trained, trained, self.causal))

    def query_scale(
        self, q_len: int, k_len: int, causal: bool, device: torch.device | None = None
    ) -> Tensor | float:
        """Multiplier of each query's q·k logits: a float when all queries share it, else
        (Tq,) fp32.

        Causal attention with ``log_length_scale``: the Tq queries are the last ones of k_len
        keys (a cached prefix included), so query i sees k_len − Tq + i + 1 keys and gets
        ``length_factor`` of that count; it never depends on later tokens. Otherwise (and
        whenever no query sees more keys than training did) ``attention_scale(k_len)``, a
        float, exactly as without the option.

        With ``ssmax``, ``attn_temperature_tuning``, or the log-length factor under a window or
        chunks: ``length_temperature`` (per query, from the keys each query sees)."""
        if (
            self.ssmax_scales is not None
            or self.cfg.attn_temperature_tuning
            or (self.cfg.log_length_scale and self.local)
        ):
            return self.length_temperature(q_len, k_len, causal, device)
        if not causal:
            return self.attention_scale(k_len)
        if self.length_factor(k_len) == 1.0:  # no query sees more keys than training did
            # the same float as attention_scale(k_len), computed without it: a decoding cache
            # may pin attention_scale to the full sequence's (lengen.model.cache)
            return self.length_factor(k_len) * self.logit_temperature()
        keys = torch.arange(k_len - q_len + 1, k_len + 1, dtype=torch.float64)  # per query
        factor = (keys.log() / math.log(max(self.trained_keys, 2))).clamp(min=1.0)
        scale = factor * self.logit_temperature()  # float64 on the CPU, like the float path
        return scale.to(device=device, dtype=torch.float32)  # (Tq,)

    def length_temperature(
        self, q_len: int, k_len: int, causal: bool, device: torch.device | None = None
    ) -> Tensor:
        """Per-query multipliers of the logits of the last Tq of Tk queries
        (``lengen.pe.temperature``) -> (Tq,) fp32, or (H, Tq) with SSMax's per-head s.

        n is the keys each query sees (``visible_keys``: windows and chunks counted); Llama 4's
        temperature reads the query's token index t = Tk − Tq + i, as Hugging Face's
        ``cache_position``."""
        keys = self.visible_keys(q_len, k_len, causal)  # (Tq,) float64
        factor = torch.full_like(keys, self.logit_temperature())
        if self.cfg.log_length_scale and self.trained_keys:
            factor = factor * log_length_factor(keys, self.trained_keys)
        if self.cfg.attn_temperature_tuning:
            index = torch.arange(k_len - q_len, k_len, dtype=torch.float64)  # (Tq,)
            factor = factor * llama4_query_temperature(
                index, self.cfg.floor_scale, self.cfg.attn_scale
            )
        factor = factor.to(device=device, dtype=torch.float32)  # (Tq,)
        if self.ssmax_scales is None:
            return factor
        scales = self.ssmax_scales.view(-1, self.n_heads)[self.layer].float()  # (H,), s
        log_keys = keys.log().to(device=device, dtype=torch.float32)  # (Tq,)
        return factor * scales[:, None] * log_keys  # (H, Tq)
